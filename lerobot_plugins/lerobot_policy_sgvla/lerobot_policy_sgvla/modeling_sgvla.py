"""sgvla's scripted policies as LeRobot policies, stepped by LeRobot's evaluation loop.

What a scripted policy reads is explicit: per sub-env, the env's privileged observation
(``observation.sgvla_privileged``, `lerobot_env_sgvla.privileged`: the scene, the goal, the table's centre, the
episode's identity) and the task string LeRobot's loop passes (``task``: `lerobot_env_sgvla`'s live prompt, the one
sgvla's engine hands its policies). Each step becomes the `StepInput` sgvla's engine builds (no raw observation: the
scripted policies read none), with the suite's pick-and-place controller factory, as sgvla's policy server adds it; the action goes back in the
env's units (`SgvlaEnvConfig.env_action`: LIBERO's as they are, the SO101 twin's in LeRobot's degrees).

Per-episode state. Every episode is a session of its own: an instance of the sgvla policy, reset with the first
prompt and the episode's seed as sgvla's engine resets it, and its queue of actions (`n_action_steps`). Sessions are
keyed by the episode's key in the privileged state, never by batch index alone: LeRobot runs several tasks' vector
envs on one policy (`max_parallel_tasks`, threads) and autoresets a finished sub-env within a batch, and a queue
shared across those (LeRobot issue 4327) mixes episodes. So `reset()`, which LeRobot's loop calls at the start of
every rollout (from each task's thread), drops nothing; a session ends when it has been idle for `MAX_SESSIONS`
newer sessions (a live episode is stepped every call of its rollout).
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
import torch
from lerobot.policies.pretrained import PreTrainedPolicy
from lerobot_env_sgvla.privileged import PRIVILEGED_KEY, unpack

from lerobot_policy_sgvla.configuration_sgvla import (
    SgvlaExpertConfig,
    SgvlaPromptGroundedConfig,
    SgvlaScriptedConfig,
)
from sgvla.core.protocols import PolicyGaveUp, StepInput

BATCH_KEY = f"observation.{PRIVILEGED_KEY}"
MAX_SESSIONS = 4096


@cache
def _controller_factory(suite: str):
    from sgvla.eval.suite import SuiteConfig

    return SuiteConfig.choice(suite)().controller_factory()


@cache
def _env_config(env_type: str):
    """The env type's default config: its `env_action` turns a scripted policy's backend action into the env's units."""
    from lerobot.envs.configs import EnvConfig

    return EnvConfig.get_choice_class(env_type)()


@cache
def _ontology(name: str):
    from sgvla.scene_graph import load_ontology

    return load_ontology(name)


@dataclass
class _Session:
    policy: Any  # the sgvla scripted policy of this episode
    queue: deque = field(default_factory=deque)


class SgvlaScriptedPolicy(PreTrainedPolicy):
    """One sgvla scripted policy for every sub-env of LeRobot's loop; see the module docstring."""

    config_class = SgvlaScriptedConfig
    name = "sgvla_scripted"

    def __init__(self, config: SgvlaScriptedConfig, **kwargs: Any):
        super().__init__(config)
        self.sgvla_config = config.sgvla_policy()
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.Lock()

    def get_optim_params(self) -> dict:
        return {}

    def reset(self) -> None:
        """Nothing to drop: sessions are per episode key (see the module docstring)."""

    def forward(self, batch: dict[str, torch.Tensor]):
        raise NotImplementedError(f"{self.config.type} is scripted: there is nothing to train")

    def _session(self, episode: dict[str, Any], prompt: str) -> _Session:
        key = episode["key"]
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                policy = self.sgvla_config.make(ontology=_ontology(episode["ontology"]))
                policy.reset(prompt, seed=int(episode["seed"]))
                session = self._sessions[key] = _Session(policy)
                while len(self._sessions) > MAX_SESSIONS:
                    self._sessions.popitem(last=False)
            self._sessions.move_to_end(key)
            return session

    def _decide(self, session: _Session, scene: Any, info: dict[str, Any], episode: dict[str, Any],
                prompt: str) -> np.ndarray:
        step = StepInput({}, prompt, scene, {**info, "pick_place": _controller_factory(episode["suite"])})
        try:
            action = session.policy.act(step)
        except PolicyGaveUp as e:  # sgvla's loop ends the episode as the policy's failure; LeRobot's cannot
            raise RuntimeError(f"{self.config.type} gave up in episode (task {episode['task_id']}, seed "
                               f"{episode['seed']}): {e}; LeRobot's loop cannot end one episode early") from e
        return _env_config(episode["env_type"]).env_action(action)

    def _steps(self, batch: dict[str, Any]):
        """(session, scene, info, episode, prompt) per sub-env of the batch."""
        if BATCH_KEY not in batch:
            raise ValueError(f"{self.config.type} reads the scene from {BATCH_KEY}, which this env does not give: "
                             "run it with --env.type=sgvla_libero (or sgvla_so101_twin) --env.privileged=true")
        states = batch[BATCH_KEY].detach().cpu().numpy()
        tasks = list(batch.get("task") or [])
        if len(tasks) != len(states):
            raise ValueError(f"{self.config.type}: {len(states)} privileged states but {len(tasks)} task strings")
        for state, prompt in zip(states, tasks, strict=True):
            scene, info, episode = unpack(state)
            yield self._session(episode, prompt), scene, info, episode, prompt

    @torch.no_grad()
    def predict_action_chunk(self, batch: dict[str, Any], **kwargs: Any) -> torch.Tensor:
        """(B, n_action_steps, A) float64: each sub-env's action decided on this step's scene, held for the chunk."""
        n = self.config.n_action_steps
        return torch.from_numpy(np.stack([np.repeat(self._decide(*step)[None], n, axis=0)
                                          for step in self._steps(batch)]))

    @torch.no_grad()
    def select_action(self, batch: dict[str, Any], **kwargs: Any) -> torch.Tensor:
        """(B, A) float64: each sub-env's next action from its episode's queue, decided anew when it is empty."""
        actions = []
        for session, *step in self._steps(batch):
            if not session.queue:
                action = self._decide(session, *step)
                session.queue.extend(action.copy() for _ in range(self.config.n_action_steps))
            actions.append(session.queue.popleft())
        return torch.from_numpy(np.stack(actions))


class SgvlaExpertPolicy(SgvlaScriptedPolicy):
    config_class = SgvlaExpertConfig
    name = "sgvla_expert"


class SgvlaPromptGroundedPolicy(SgvlaScriptedPolicy):
    config_class = SgvlaPromptGroundedConfig
    name = "sgvla_prompt_grounded"
