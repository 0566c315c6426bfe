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
    """One episode at a time: `reset` starts an episode (its seed seeds whatever the policy samples, so the same
    seed gives the same actions wherever the policy runs), `act` steps it, `close` frees what the policy holds."""

    name: str

    def reset(self, prompt: str, seed: int | None = None) -> None: ...

    def act(self, step: StepInput) -> np.ndarray:
        """The action for this step; raises PolicyGaveUp when it cannot act on `step`."""

    def prompt_budget(self, prompt: str) -> PromptBudget | None: ...

    def decision(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class BatchPolicy(Protocol):
    """A policy that serves many episodes at once from one copy of its weights (what a policy server hosts).

    Each episode is a session, an opaque object holding that episode's own state (action-chunk queue, prompt,
    noise stream); `act_batch` steps several sessions together, in one forward pass where the policy can. The
    item of a session whose policy gave up is the `PolicyGaveUp` itself, so one episode's end leaves the others
    of its batch alone. `sgvla.policies.serving.batch` adapts plain policies and turns a session into a `Policy`."""

    name: str

    def open_session(self) -> Any: ...

    def reset_session(self, session: Any, prompt: str, seed: int | None) -> None: ...

    def act_batch(self, sessions: Sequence[Any], steps: Sequence[StepInput]) -> list[np.ndarray | PolicyGaveUp]: ...

    def session_budget(self, session: Any, prompt: str) -> PromptBudget | None: ...

    def session_decision(self, session: Any) -> dict[str, Any]: ...

    def close_session(self, session: Any) -> None: ...

    def close(self) -> None: ...


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

    def robot_state(self) -> Any:
        """The sgvla.core.state.RobotState now (what a robot's joint_states would report)."""

    def camera_intrinsics(self) -> dict[str, np.ndarray]:
        """K (3x3) per rendered camera at its image size."""

    @property
    def control_period_s(self) -> float:
        """Simulated seconds per `step` (the clock of the topics the sim bridge publishes)."""

    @property
    def settle_steps(self) -> int:
        """Simulator steps a reset takes before its first observation (off the episode's clock)."""

    def record_facts(self) -> dict[str, Any]:
        """What every record of this task states about how it ran (the perturbation as applied)."""

    def close(self) -> None: ...
