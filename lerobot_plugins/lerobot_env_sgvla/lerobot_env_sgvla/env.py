"""One sgvla task as a gymnasium env that LeRobot's evaluation loop steps, its task string the live context.

LeRobot's loop (`lerobot.scripts.lerobot_eval.rollout`) reads each sub-env's ``task_description`` before every action
and hands it to the policy as ``task``. Here that string is the episode engine's prompt (`sgvla.core.episode.Episode`,
the engine `sgvla eval` and the ROS policy node run): the engine is started on the reset's scene and, after every
step, observes the new scene (success, progress) and rebuilds the context of the next step from the live graph
(`Episode.refresh`), so a graph-reading mode's text follows the scene as it does in sgvla's own loop, with the same
modes, graph sources, seeds and serializer. The policy is LeRobot's; the engine only holds a stand-in for it
(`LoopPolicy`).

The observation is the backend's raw observation in the suite's LeRobot form (`SgvlaEnvConfig.observation`), the
action goes to the backend after `SgvlaEnvConfig.backend_action`; ``info["is_success"]`` is the suite's success.
With ``records`` set, every episode a rollout starts with a seed ends as one sgvla `EpisodeRecord` line there
(success, steps, the first prompt, graph sizes, progress, stages, failure class), as `sgvla eval` writes them; with
``record_actions`` also the actions as the backend stepped them (`actions`). Every record holds the digest of the
actions as the backend stepped them (`action_digest`, `sgvla.core.action_digest`), as `sgvla eval`'s records do.
With ``seed_noise`` every reset seeds torch's global generator with the episode's seed, so a flow-matching policy
draws the noise it draws in `sgvla eval` (`lerobot_env_sgvla.configs` says where that holds).

With ``privileged`` the observation also holds what sgvla's scripted policies read (the scene, the goal, the
episode's identity: `lerobot_env_sgvla.privileged`), so `lerobot_policy_sgvla` can run them in LeRobot's loop.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from sgvla.core.context import ContextMode
from sgvla.core.episode import Episode, EpisodeKey
from sgvla.core.protocols import Step
from sgvla.scene_graph import load_ontology

if TYPE_CHECKING:
    from lerobot_env_sgvla.configs import SgvlaEnvConfig


class LoopPolicy:
    """The engine's stand-in for the policy LeRobot's loop steps: it is told the prompts and never asked to act. It
    measures prompts with the policy's tokenizer where it was given its meter (`tokenizer_from`); without one,
    `prompt_budget` is None and controls that match a length count words."""

    def __init__(self, name: str, meter: Any = None):
        self.name, self.meter = name, meter

    def reset(self, prompt: str, seed: int | None = None) -> None:
        pass

    def act(self, step: Any) -> np.ndarray:
        raise RuntimeError("LeRobot's evaluation loop steps the policy; the engine never asks this stand-in to act")

    def prompt_budget(self, prompt: str) -> Any:
        return None if self.meter is None else self.meter.budget(prompt)

    def decision(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


class SgvlaEnv(gym.Env):
    """One task of the config's suite (see the module docstring); `reset(seed)` places the scene the seed gives in
    `sgvla eval`, so the same seeds give the same episodes in both loops."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, config: SgvlaEnvConfig, task_id: int):
        super().__init__()
        plan = config.plan()
        self.config, self.plan, self.suite, self.task_id = config, plan, plan.suite, int(task_id)
        self.metadata = {"render_modes": ["rgb_array"], "render_fps": config.fps}
        self.render_mode = "rgb_array"
        self.backend = self.suite.make_backend(self.task_id, plan.perturbations, True, plan.max_steps)
        self.ontology = load_ontology(plan.ontology)
        self.source = plan.graph_source.make(self.backend, self.ontology, self.suite.upright)
        self.mode = ContextMode.choice(config.context_mode)()
        meter = None
        if config.tokenizer_from:
            from sgvla.policies.lerobot_vla import checkpoint_prompt_meter

            meter = checkpoint_prompt_meter(config.tokenizer_from)
        self.policy = LoopPolicy(config.policy_name, meter)
        self._max_episode_steps = int(plan.max_steps or self.backend.max_steps)  # LeRobot's loop reads it
        self.observation_space, self.action_space = config.spaces(self.backend)
        if config.privileged:
            from gymnasium import spaces

            from lerobot_env_sgvla.privileged import CAPACITY, PRIVILEGED_KEY

            state = spaces.Box(0, 255, (CAPACITY,), np.uint8)
            self.observation_space = spaces.Dict({**self.observation_space.spaces, PRIVILEGED_KEY: state})
        self._instance = secrets.token_hex(8)  # with the reset count, each episode's key (privileged state)
        self._resets = 0
        self._info: dict[str, Any] = {}
        self.task = self.backend.task  # the task's own words; the prompt is `task_description`
        self.task_description = self.backend.task
        self.engine: Episode | None = None
        self._images: dict[str, np.ndarray] = {}
        self._seed: int | None = None
        self._recorded = False
        self._actions: list[list[float]] = []
        self.results = None
        if config.records:
            from sgvla.eval.results import ResultsFile

            path = Path(config.records)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.results = ResultsFile(path)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The scene of `seed` (None, as a vector env's autoreset passes: the previous seed + 1) and the engine's
        first context. Only an episode started with a seed is recorded (an autoreset's runs past the rollout)."""
        super().reset(seed=seed)
        self._recorded = seed is None  # nothing to record
        if seed is None:
            seed = 0 if self._seed is None else self._seed + 1
        self._seed = int(seed)
        key = EpisodeKey(self.config.policy_name, self.task_id, self.plan.perturbations, self.config.context_mode,
                         self._seed)
        if self.results is not None and not self._recorded and key in self.results:
            raise ValueError(f"episode {tuple(key)} is already recorded in {self.results.path}; give "
                             "--env.records another file (or other seeds)")
        obs = self.backend.reset(self._seed)
        self._actions = []
        self._resets += 1
        scene = self.backend.scene()
        self._info = self.backend.episode_info()
        self.engine = Episode(key, self.policy, self.mode, self.source, self.ontology,
                              view=self.plan.view, max_steps=self._max_episode_steps, style=self.plan.context_style,
                              info=self._info, stages=self.suite.stages(self.task_id))
        reference = self.backend.ground_truth([self.plan.view], scene=scene)[self.plan.view]
        self.engine.start(self.backend.task, Step(obs, scene), reference)
        self.task_description = self.engine.context.prompt
        self._images = obs.images
        if self.config.seed_noise:  # last: the policy's next draw is this episode's first noise (configs' docstring)
            import torch

            torch.manual_seed(self._seed)
        return self._observation(obs.raw, scene), {"is_success": False}

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        engine = self.engine
        if engine is None or engine.done:
            raise RuntimeError("reset() first: the episode is over or was never started")
        stepped = self.config.backend_action(np.asarray(action))
        engine.took(stepped)
        if self.config.record_actions:
            self._actions.append(stepped.tolist())
        obs, success, done = self.backend.step(stepped)
        scene = self.backend.scene()
        over = engine.observe(success, done, scene)
        if not over:
            self.task_description = engine.refresh(Step(obs, scene)).prompt  # what the policy reads next
        self._images = obs.images
        if over:
            self._record()
        info = {"is_success": bool(success), "task_id": self.task_id, "done": bool(over)}
        return self._observation(obs.raw, scene), float(success), bool(success), bool(over and not success), info

    def _observation(self, raw: dict[str, Any], scene: Any) -> dict[str, Any]:
        observation = self.config.observation(raw)
        if self.config.privileged:
            from lerobot_env_sgvla.privileged import PRIVILEGED_KEY, pack

            episode = {"key": f"{self._instance}-{self._resets}", "task_id": self.task_id, "seed": self._seed,
                       "step": self.engine.steps, "suite": self.suite.type, "ontology": self.plan.ontology,
                       "env_type": self.config.type}
            observation[PRIVILEGED_KEY] = pack(scene, self._info, episode)
        return observation

    def _record(self) -> None:
        if self.results is None or self._recorded or self.engine is None:
            return
        actions = {"actions": self._actions} if self.config.record_actions else {}
        record = self.engine.record(**self.backend.record_facts(), **self.suite.record_facts(), loop="lerobot-eval",
                                    **actions)
        self.results.append(record.to_json())
        self._recorded = True

    def render(self) -> np.ndarray:
        """The first camera's image of the last step, upright (what LeRobot's eval writes into its videos)."""
        if not self._images:
            raise RuntimeError("reset() first: no image yet")
        return np.ascontiguousarray(self.suite.upright(next(iter(self._images.values()))))

    def close(self) -> None:
        source, backend, self.source, self.backend = self.source, self.backend, None, None
        for part in (source, backend):
            if part is not None:
                part.close()


def make_sgvla_env(config: SgvlaEnvConfig, task_id: int) -> SgvlaEnv:
    """The factory a vector env calls (module level, so AsyncVectorEnv can pickle it)."""
    return SgvlaEnv(config, task_id)
