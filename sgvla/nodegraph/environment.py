"""The environment half of an episode over topics (the ``sim_bridge`` node): a suite's backend, reset and stepped.

The backend comes from the reset request's registered suite and options (rebuilt when they, the task, the
perturbation or the rendering change, as the in-process runner rebuilds it per task), so one node serves every
simulated suite. Between the environment and the policy node only (episode, step)-keyed messages pass; with
lock-step stepping the sequence of resets and steps is the in-process one, so the same seeds give the same
actions and outcomes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sgvla.eval.suite import SuiteConfig


@dataclass(frozen=True)
class EnvironmentSettings:
    """What a backend is built from; a change rebuilds it."""

    suite: SuiteConfig
    task_id: int
    perturbation: str
    render_images: bool


@dataclass
class StepState:
    """One step's outcome and what the environment publishes about it."""

    episode: int
    step: int
    max_steps: int
    success: bool
    done: bool
    task: str
    observation: Any  # sgvla.core.state.Observation
    scene: Any  # sgvla.core.state.SceneState
    robot: Any  # sgvla.core.state.RobotState
    info: dict[str, Any]  # the episode facts scripted policies are told (goal, table_center)


class EnvironmentSession:
    def __init__(self) -> None:
        self.backend = None
        self.settings: EnvironmentSettings | None = None
        self.episode = -1
        self.steps = 0
        self.max_steps = 0
        self.success = False
        self.done = True
        self.observation = None
        self.info: dict[str, Any] = {}

    def _backend(self, settings: EnvironmentSettings):
        if self.backend is None or settings != self.settings:
            self.close()
            self.backend = settings.suite.make_backend(settings.task_id, settings.perturbation, settings.render_images)
            self.settings = settings
        return self.backend

    def reset(self, episode: int, settings: EnvironmentSettings, seed: int, max_steps: int = 0) -> StepState:
        backend = self._backend(settings)
        self.observation = backend.reset(seed)
        self.info = backend.episode_info()
        self.episode, self.steps = episode, 0
        self.max_steps = max_steps or backend.max_steps
        self.success, self.done = False, False
        return self.state()

    def step(self, action: np.ndarray) -> StepState:
        if self.done:
            raise RuntimeError(f"episode {self.episode} is over; reset first")
        self.observation, success, done = self.backend.step(action)
        self.steps += 1
        self.success = bool(success)
        self.done = bool(success or done or self.steps >= self.max_steps)
        return self.state()

    def state(self) -> StepState:
        b = self.backend
        return StepState(self.episode, self.steps, self.max_steps, self.success, self.done, b.task, self.observation,
                         b.scene(), b.robot_state(), self.info)

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None
            self.settings = None
