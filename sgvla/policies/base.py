"""The one interface every policy of an evaluation implements.

A policy gets, every control step, the raw observation of the environment (unbatched, exactly as
LeRobot's LIBERO gym env returns it), the prompt of this episode (the task string, possibly with
a scene-graph context composed into it), and the privileged simulator scene. Learned policies
must ignore the scene; scripted ones read what their perception model allows (the expert knows
which object is the target, the prompt-grounded policy does not).
"""

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class PromptBudget:
    """How much of a prompt a policy's tokenizer keeps."""

    tokens: int  # tokens of the full prompt
    budget: int | None  # the policy's maximum; None when it does not truncate
    triplets_total: int  # triplets in the prompt's scene-graph context
    triplets_kept: int  # of those, how many survive truncation whole

    @property
    def truncated(self) -> bool:
        return self.budget is not None and self.tokens > self.budget


@dataclass
class StepInput:
    observation: dict[str, Any]
    prompt: str
    scene: Any = None  # sgvla.sim scene state; None on hardware
    info: dict[str, Any] = field(default_factory=dict)


class Policy(Protocol):
    name: str

    def reset(self, prompt: str) -> None:
        """Start an episode; the prompt is fixed for the whole episode unless the graph is live."""

    def act(self, step: StepInput) -> np.ndarray:
        """The next action, a 1-D float array in the environment's action space."""

    def prompt_budget(self, prompt: str) -> PromptBudget | None:
        """Token use of `prompt` for policies with a tokenizer; None for scripted policies."""

    def decision(self) -> dict[str, Any]:
        """What the policy decided this episode that a record should keep (e.g. its grounding)."""
