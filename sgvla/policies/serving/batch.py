"""Plain policies as `BatchPolicy`s (sgvla.core.protocols), the form a policy server hosts.

`PerSession` serves a plain policy's episodes from one instance each: right for policies without weights (the
scripted ones), whose state is all per episode and whose step costs nothing to batch. Learned policies implement
`BatchPolicy` themselves (one model, a session per episode; their in-process `act` is `act_batch` of one), so the
in-process and the served runs differ only by the batch's float rounding. `PolicyConfig.make_batch` picks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sgvla.core.protocols import Policy, PolicyGaveUp, PromptBudget, StepInput


def act_each(act: Callable[[Any, StepInput], np.ndarray], sessions: Sequence[Any],
             steps: Sequence[StepInput]) -> list[np.ndarray | PolicyGaveUp]:
    """`act` per session; a session whose policy gives up gets its `PolicyGaveUp`, the others go on."""
    out: list[np.ndarray | PolicyGaveUp] = []
    for session, step in zip(sessions, steps, strict=True):
        try:
            out.append(act(session, step))
        except PolicyGaveUp as e:
            out.append(e)
    return out


class PerSession:
    """A `BatchPolicy` whose sessions are instances of a plain `Policy` made by `factory`."""

    def __init__(self, factory: Callable[[], Policy], name: str):
        self.factory, self.name = factory, name

    def open_session(self) -> Policy:
        return self.factory()

    def reset_session(self, session: Policy, prompt: str, seed: int | None) -> None:
        session.reset(prompt, seed=seed)

    def act_batch(self, sessions: Sequence[Policy], steps: Sequence[StepInput]) -> list[np.ndarray | PolicyGaveUp]:
        return act_each(lambda policy, step: policy.act(step), sessions, steps)

    def session_budget(self, session: Policy, prompt: str) -> PromptBudget | None:
        return session.prompt_budget(prompt)

    def session_decision(self, session: Policy) -> dict[str, Any]:
        return session.decision()

    def close_session(self, session: Policy) -> None:
        session.close()

    def close(self) -> None:
        pass
