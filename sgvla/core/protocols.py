"""The protocols every embodiment, policy and graph source implements, and what passes between them.

A backend (LIBERO, the SO101 twin, the physical SO101) turns actions into steps; a policy turns a step and a
prompt into an action; a graph source turns a step into the live scene graph of a camera view. The episode
engine (:mod:`sgvla.core.episode`) connects them, in process and inside the ROS nodes alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from sgvla.scene_graph import ViewGraph


@dataclass(frozen=True)
class Step:
    """What a step offers: the observation (camera images, and the raw observation policies act on) and the
    privileged scene (None where nothing knows it: the physical arm without perception)."""

    observation: Any  # sgvla.core.state.Observation
    scene: Any = None  # sgvla.core.state.SceneState


class GraphSource(Protocol):
    name: str

    def reset(self) -> None: ...

    def view_graph(self, view: str, observation: Any, scene: Any, task: str) -> ViewGraph:
        """The live graph (and boxes, where known) of `view` now; raises InfrastructureFailure if it has none."""

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


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
    """What `Policy.act` gets: the observation, the episode's current prompt, the privileged scene (scripted
    policies), and the episode facts (`goal`, `table_center`, the embodiment's `pick_place` controller factory)."""

    observation: Any
    prompt: str
    scene: Any = None
    info: dict[str, Any] = field(default_factory=dict)


class PolicyGaveUp(Exception):
    """Raised by ``Policy.act`` when the policy cannot act on what it was given (a perceived scene without the
    object the prompt names): the episode ends there as the policy's failure, with this reason. A result, unlike
    ``InfrastructureFailure``: what the system under test perceives is part of what is evaluated, so a miss must
    lower its success rate, not drop out of it and be retried."""


class Policy(Protocol):
    name: str

    def reset(self, prompt: str) -> None: ...

    def act(self, step: StepInput) -> np.ndarray:
        """The action for this step; raises PolicyGaveUp when it cannot act on `step`."""

    def prompt_budget(self, prompt: str) -> PromptBudget | None: ...

    def decision(self) -> dict[str, Any]: ...


class Backend(Protocol):
    """An embodiment's environment for one task: what the in-process runner drives."""

    task: str  # the task's prompt (after any perturbation of the wording)
    max_steps: int  # the task suite's step limit

    def reset(self, seed: int) -> Any:
        """Place the scene for `seed`; returns the first Observation."""

    def step(self, action: np.ndarray) -> tuple[Any, bool, bool]:
        """Apply one action for one control period: (observation, success, done)."""

    def scene(self) -> Any:
        """The privileged SceneState now."""

    def ground_truth(self, views: Sequence[str] | None = None, scene: Any = None) -> dict[str, ViewGraph]:
        """Ground-truth graph and boxes per camera view."""

    def episode_info(self) -> dict[str, Any]:
        """Facts scripted policies are told: `goal` = (target, place), `table_center`."""

    def pick_place(self, target: str, place: str) -> Any:
        """The embodiment's pick-and-place controller for scripted policies."""

    def close(self) -> None: ...
