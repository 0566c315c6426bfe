"""Reaching a policy server: `RemotePolicy` (a `Policy` whose steps run in a server) over any transport (a
`PolicyClient`: `sgvla.policies.serving.local`'s Unix socket, `sgvla.policies.serving.ray`'s actor calls), and the
two halves every transport shares: the client's `call_server` and the server's `answer`.

A server that is gone (killed, crashed, its machine lost) is an infrastructure failure of the episodes then
running (`PolicyServerLost`), never their policy's failure: the runner records them as such and reruns them.
An error the policy raised inside the server comes back as `RemotePolicyError` with the server's traceback.
"""

from __future__ import annotations

import logging
import traceback
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from sgvla.core.episode import InfrastructureFailure
from sgvla.core.protocols import PolicyGaveUp, PromptBudget, StepInput

log = logging.getLogger(__name__)


class PolicyServerLost(InfrastructureFailure):
    """The policy server stopped answering (its process or node is gone)."""

    kind = "policy_server_lost"


class RemotePolicyError(RuntimeError):
    """The policy raised inside the server; the message holds the server's traceback."""


class PolicyClient(Protocol):
    """One process's way to a policy server (local: `LocalClient`; Ray: `RayClient`)."""

    def call(self, policy: str, session: str, method: str, *args: Any) -> Any: ...

    def close(self) -> None: ...


class RemotePolicy:
    """A policy served by a policy server, as a `Policy` of one worker: one session, reopened at every `reset`.
    Steps go without the worker's own controller factory (it drives the worker's simulator); the server adds its
    suite's."""

    def __init__(self, name: str, client: PolicyClient):
        self.name, self.client = name, client
        self.session = uuid.uuid4().hex
        self._open = False

    def _call(self, method: str, *args: Any) -> Any:
        return self.client.call(self.name, self.session, method, *args)

    def reset(self, prompt: str, seed: int | None = None) -> None:
        self._call("reset", prompt, seed)
        self._open = True

    def act(self, step: StepInput) -> np.ndarray:
        info = {k: v for k, v in step.info.items() if k != "pick_place"}
        return self._call("act", StepInput(step.observation, step.prompt, step.scene, info))

    def prompt_budget(self, prompt: str) -> PromptBudget | None:
        """The policy's count of `prompt`; before `reset` too (the server counts it with a fresh session), since the
        episode engine builds the first prompt, which a control mode sizes in tokens, before it resets the policy."""
        return self._call("budget", prompt)

    def decision(self) -> dict[str, Any]:
        return self._call("decision") if self._open else {}

    def close(self) -> None:
        if self._open:
            self._open = False
            try:
                self._call("close")
            except (InfrastructureFailure, RemotePolicyError):
                pass  # a server that is gone has closed the session with itself


def call_server(exchange: Callable[[], tuple[str, Any]], forget: Callable[[], None],
                lost: tuple[type[BaseException], ...], where: str, method: str) -> Any:
    """One call of a client through its transport (`exchange` sends it, returns the server's `answer`): the server's
    result, its policy's `PolicyGaveUp`, or `RemotePolicyError`. A transport error in `lost` means the server is gone
    (`forget` drops the transport's handle to it): a reset, which opens its session anew, is sent once more (a server
    restarted since this client's last call answers it); anything else is a `PolicyServerLost`."""
    try:
        status, payload = exchange()
    except lost as e:
        forget()
        try:
            if method != "reset":
                raise
            status, payload = exchange()
        except lost:
            forget()
            raise PolicyServerLost(f"the policy server ({where}) is gone: {type(e).__name__}: {str(e)[:500]}") from None
    if status == "ok":
        return payload
    if status == "gave_up":
        raise PolicyGaveUp(payload)
    raise RemotePolicyError(payload)


def answer(server: Any, policy: str, session: str, method: str, args: tuple) -> tuple[str, Any]:
    """A server's reply to one call: ("ok", result), ("gave_up", reason) or ("error", the traceback)."""
    try:
        return "ok", server.call(policy, session, method, *args)
    except PolicyGaveUp as e:
        return "gave_up", str(e)
    except Exception as e:
        return "error", f"{type(e).__name__}: {e}\n(in the policy server)\n{traceback.format_exc()[-3000:]}"
