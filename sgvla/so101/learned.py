"""LeRobot checkpoints trained on SO101 data (what `sgvla record` or `sgvla demos generate --suite so101_twin`
wrote) driving the SO101: the arm node, the twin node, or the twin suite in process.

Observations map to the checkpoint's input features as the dataset named them: ``observation.state`` is the
six joints in LeRobot units (degrees; gripper 0..100 %, `sgvla.so101.hardware.joints`), each
``observation.images.<camera>`` the rig camera of that name, resized to the feature's shape by LeRobot's
async-inference helper. The prompt goes where LeRobot's own rollout puts the task (``observation["task"]``),
which the checkpoint's processor tokenizes if it reads language. Loading follows LeRobot's async policy server
(`from_pretrained`, `make_pre_post_processors` with the device overridden); a chunk is
`predict_action_chunk`, post-processed action by action as that server does.

:class:`ChunkedActor` is the control side of LeRobot's async inference in one process: a background thread
computes the next chunk while the current one plays; a chunk computed from the observation of step ``t0`` holds
the goals of steps ``t0, t0 + 1, ...``, and the actor switches to it at the current step (the goals already in
the past are skipped); when the newest chunk is played out (inference slower than the rest of a chunk lasts) its
last goal is held, also when it arrives already played out.
A new chunk is asked for once the current one has at most ``refill_at`` of its goals left, so with inference
shorter than that share of a chunk the arm never waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sgvla.so101.hardware.joints import JOINTS, from_radians, to_radians

STATE = "observation.state"
IMAGE_PREFIX = "observation.images."


@dataclass
class So101Observation:
    """What the robot has at one step: joint positions in LeRobot units by joint name, RGB images (H, W, 3,
    uint8) by rig camera name."""

    positions: Mapping[str, float]
    images: Mapping[str, np.ndarray] = field(default_factory=dict)


class So101Checkpoint:
    """A LeRobot policy directory (or hub id) whose features are an SO101 dataset's; `chunk` gives goals in
    LeRobot units, one row per control step, JOINTS order.

    `min_inference_s` pads each chunk's computation to at least that long (a slow GPU or a big model, stood in
    for in tests and benchmarks)."""

    def __init__(self, path: str | Path, device: str = "cpu", min_inference_s: float = 0.0,
                 policy_type: str | None = None, random_weights: bool = False,
                 weights_sha256: str | None = None, threads: int = 2) -> None:
        import torch
        from lerobot.configs import FeatureType
        from lerobot.policies import make_pre_post_processors
        from lerobot.policies.factory import get_policy_class

        from sgvla.policies.checkpoint import checkpoint_path, lerobot_prints, processor_overrides
        from sgvla.policies.weights import checked_config

        if min_inference_s < 0:
            raise ValueError(f"min_inference_s must be >= 0, got {min_inference_s}")
        self.threads = threads
        path = checkpoint_path(path)
        cfg, self.provenance = checked_config(path, device, policy_type, random_weights, weights_sha256)
        state = cfg.input_features.get(STATE)
        action = cfg.output_features.get("action")
        if state is None or action is None or state.shape != (len(JOINTS),) or action.shape != (len(JOINTS),):
            raise ValueError(f"{path}: not an SO101 checkpoint: it needs {STATE} and action of {len(JOINTS)} joints "
                             f"({list(JOINTS)}); it has state {state and state.shape}, action "
                             f"{action and action.shape}")
        self.path, self.min_inference_s = path, min_inference_s
        self.cameras = {key.removeprefix(IMAGE_PREFIX): tuple(ft.shape) for key, ft in cfg.input_features.items()
                        if ft.type is FeatureType.VISUAL}
        policy_class = get_policy_class(cfg.type)  # weights checked above; random only with random_weights
        with lerobot_prints(Path(path).name):  # LeRobot prints while it loads: kept off sgvla's stdout
            self.policy = policy_class.from_pretrained(path, config=cfg) if cfg.pretrained_path else policy_class(cfg)
        self.policy.to(device)
        self.policy.eval()
        pre, post = processor_overrides(device)
        self.preprocessor, self.postprocessor = make_pre_post_processors(
            self.policy.config, pretrained_path=path, preprocessor_overrides=pre, postprocessor_overrides=post)
        self.type, self.device = cfg.type, device
        self._torch = torch
        from sgvla.policies.lerobot_vla import noise_shape

        self.noise_shape = noise_shape(self.policy)

    def reset(self) -> None:
        self.policy.reset()

    def batch(self, observation: So101Observation, task: str) -> dict[str, Any]:
        """The observation as the checkpoint's features name it, in LeRobot units, batched (before the preprocessor)."""
        from lerobot.async_inference.helpers import prepare_image, resize_robot_observation_image

        torch = self._torch
        missing = sorted(set(self.cameras) - set(observation.images))
        if missing:
            raise ValueError(f"the checkpoint reads camera(s) {missing}; the observation has {sorted(observation.images)}")
        batch: dict[str, Any] = {STATE: torch.tensor([[float(observation.positions[j]) for j in JOINTS]])}
        for name, shape in self.cameras.items():
            image = torch.from_numpy(np.ascontiguousarray(observation.images[name]))
            batch[IMAGE_PREFIX + name] = prepare_image(resize_robot_observation_image(image, shape)).unsqueeze(0)
        batch["task"] = [task]
        return batch

    def chunk(self, observation: So101Observation, task: str, generator: Any = None) -> np.ndarray:
        """The next goals (n, 6), LeRobot units, from this observation (its step is the chunk's first)."""
        return self.chunks([observation], [task], [generator])[0]

    def chunks(self, observations: Sequence[So101Observation], tasks: Sequence[str],
               generators: Sequence[Any] | None = None) -> list[np.ndarray]:
        """`chunk` of several episodes in one forward pass; each flow-matching episode's noise from its generator
        (None: drawn at random)."""
        from sgvla.policies.lerobot_vla import episode_noise, stack_batches

        from sgvla.policies.checkpoint import use_threads

        torch = self._torch
        use_threads(self.threads)
        started = time.monotonic()
        with torch.inference_mode():
            batch = stack_batches([self.preprocessor(self.batch(o, t)) for o, t in zip(observations, tasks,
                                                                                      strict=True)])
            extra = {}
            if self.noise_shape is not None:
                generators = generators or [None] * len(observations)
                extra["noise"] = episode_noise(self.noise_shape, generators, self.device)
            actions = self.policy.predict_action_chunk(batch, **extra)
            if actions.ndim == 2:
                actions = actions.unsqueeze(0)
            goals = [self.postprocessor(actions[:, i, :]) for i in range(actions.shape[1])]
            out = self._torch.stack(goals, dim=1).float().cpu().numpy()
        time.sleep(max(0.0, self.min_inference_s - (time.monotonic() - started)))
        return list(out)


@dataclass
class ActorStats:
    inference_s: list[float] = field(default_factory=list)
    chunks: int = 0  # chunks adopted
    held: int = 0  # ticks with no chunk covering them: the last goal held
    skipped: int = 0  # goals of adopted chunks that were already in the past


class ChunkedActor:
    """Goals for every control step from chunks computed in a background thread (see the module docstring).

    ``tick(t, observe)`` is called once per control step ``t`` (0, 1, 2, ...) and never waits for inference:
    it returns the goal of step ``t`` (LeRobot units by joint name), or None before the first chunk has come.
    ``observe()`` is called only when a chunk is to be computed; it returns the present observation, or None
    when there is none yet. ``task`` may change between ticks (a live graph in the prompt): each chunk is computed
    with the prompt of the step it was asked at."""

    def __init__(self, checkpoint: So101Checkpoint, task: str, refill_at: float = 0.5) -> None:
        if not 0.0 <= refill_at < 1.0:
            raise ValueError(f"refill_at is a share of a chunk in [0, 1), got {refill_at}")
        self.checkpoint, self.task, self.refill_at = checkpoint, task, refill_at
        self.stats = ActorStats()
        self._lock = threading.Condition()
        self._request: tuple[int, So101Observation, str] | None = None
        self._done: tuple[int, np.ndarray] | None = None
        self._busy = False
        self._error: BaseException | None = None
        self._stop = False
        self._chunk: tuple[int, np.ndarray] | None = None
        self._goal: dict[str, float] | None = None
        self._thread = threading.Thread(target=self._work, name="chunk-inference", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                while self._request is None and not self._stop:
                    self._lock.wait()
                if self._stop:
                    return
                (t0, observation, task), self._request = self._request, None
            started = time.monotonic()
            try:
                goals = self.checkpoint.chunk(observation, task)
            except BaseException as exc:  # noqa: BLE001 - handed to the control side, which raises it
                with self._lock:
                    self._error, self._busy = exc, False
                return
            with self._lock:
                self.stats.inference_s.append(time.monotonic() - started)
                self._done, self._busy = (t0, goals), False

    def tick(self, t: int, observe: Callable[[], So101Observation | None]) -> dict[str, float] | None:
        with self._lock:
            if self._error is not None:
                raise RuntimeError(f"policy inference failed: {self._error}") from self._error
            done, self._done = self._done, None
            busy = self._busy
        if done is not None:
            t0, goals = done
            self.stats.chunks += 1
            self.stats.skipped += max(0, min(t - t0, len(goals)))
            self._chunk = done
        remaining = 0
        if self._chunk is not None:
            t0, goals = self._chunk  # t0 <= t: a chunk is asked for at the step whose observation it reads
            if t - t0 < len(goals):
                self._goal = dict(zip(JOINTS, map(float, goals[t - t0])))
                remaining = t0 + len(goals) - t - 1
            else:  # starved: the newest chunk is played out; its last goal is held
                self._goal = dict(zip(JOINTS, map(float, goals[-1])))
                self.stats.held += 1
        if not busy and (self._chunk is None or remaining <= self.refill_at * len(self._chunk[1])):
            observation = observe()
            if observation is not None:
                with self._lock:
                    self._request, self._busy = (t, observation, self.task), True
                    self._lock.notify()
        return self._goal

    def close(self) -> None:
        with self._lock:
            self._stop = True
            self._lock.notify()
        self._thread.join(timeout=30)


@dataclass
class So101Session:
    """One twin episode's goals still to play and its noise stream."""

    queue: list = field(default_factory=list)
    generator: Any = None


class So101LeRobotPolicy:
    """A checkpoint as an in-process `Policy` of the twin suite: ``act`` takes the twin backend's raw observation
    (joint radians in JOINTS order, images by camera) and returns joint targets in radians. The evaluation loop
    waits for it, so chunks play one goal per step and the next is computed when one runs out. As a `BatchPolicy`
    (a policy server's) it keeps each episode's queue in a session and computes due chunks in one pass."""

    def __init__(self, checkpoint: So101Checkpoint, name: str) -> None:
        import torch

        from sgvla.policies.lerobot_vla import PromptMeter

        self.checkpoint, self.name = checkpoint, name
        self._session = So101Session()
        # the prompt as the checkpoint's tokenizer sees it (None: no language input, e.g. ACT)
        self.meter = PromptMeter.of(checkpoint.preprocessor, torch.zeros(1, len(JOINTS)))

    def reset(self, prompt: str, seed: int | None = None) -> None:
        self._session = self.open_session()
        self.reset_session(self._session, prompt, seed)

    def act(self, step) -> np.ndarray:
        return self.act_batch([self._session], [step])[0]

    def prompt_budget(self, prompt: str):
        return None if self.meter is None else self.meter.budget(prompt)

    def decision(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass

    def open_session(self) -> So101Session:
        return So101Session()

    def reset_session(self, session: So101Session, prompt: str, seed: int | None) -> None:
        from sgvla.policies.lerobot_vla import seeded_generator

        session.queue, session.generator = [], seeded_generator(seed, self.checkpoint.device)

    def act_batch(self, sessions: Sequence[So101Session], steps: Sequence[Any]) -> list[np.ndarray]:
        due = [i for i, session in enumerate(sessions) if not session.queue]
        if due:
            observations = [So101Observation(from_radians(JOINTS, list(steps[i].observation["agent_pos"])),
                                              steps[i].observation.get("pixels", {})) for i in due]
            chunks = self.checkpoint.chunks(observations, [steps[i].prompt for i in due],
                                            [sessions[i].generator for i in due])
            for i, chunk in zip(due, chunks, strict=True):
                sessions[i].queue = list(chunk)
        return [np.array(to_radians(dict(zip(JOINTS, map(float, session.queue.pop(0)))))) for session in sessions]

    def session_budget(self, session: So101Session, prompt: str):
        return self.prompt_budget(prompt)

    def session_decision(self, session: So101Session) -> dict[str, Any]:
        return {}

    def close_session(self, session: So101Session) -> None:
        session.queue = []


class So101ChunkedPolicy(So101LeRobotPolicy):
    """A checkpoint as the `Policy` of an episode on the physical arm (the arm_policy node): ``act`` never waits
    for inference. A `ChunkedActor` per episode computes chunks in the background while the current one plays;
    ``act`` is called once per control step and returns that step's goal (LeRobot units, JOINTS order), or, before
    the first chunk has come, the present positions (the arm holds). The raw observation is the arm's:
    ``agent_pos`` in LeRobot units (JOINTS order) and ``pixels`` (upright RGB by rig camera name). The prompt of
    each step (the standard one, or with the live graph) is the task of the chunk asked for at that step.
    ``close`` ends the episode's inference thread."""

    def __init__(self, checkpoint: So101Checkpoint, name: str, refill_at: float = 0.5) -> None:
        super().__init__(checkpoint, name)
        if not 0.0 <= refill_at < 1.0:  # checked now, not at the first episode
            raise ValueError(f"refill_at is a share of a chunk in [0, 1), got {refill_at}")
        self.refill_at = refill_at
        self.actor: ChunkedActor | None = None
        self._step = 0
        self._waited = 0  # steps before the first chunk came (the arm held)

    def reset(self, prompt: str, seed: int | None = None) -> None:
        self.close()
        self.checkpoint.reset()
        self._step = self._waited = 0
        self.actor = ChunkedActor(self.checkpoint, prompt, self.refill_at)

    def act(self, step) -> np.ndarray:
        if self.actor is None:
            raise RuntimeError("reset() comes first")
        raw = step.observation
        positions = dict(zip(JOINTS, map(float, raw["agent_pos"]), strict=True))
        self.actor.task = step.prompt
        goal = self.actor.tick(self._step, lambda: So101Observation(positions, raw.get("pixels", {})))
        self._step += 1
        if goal is None:
            self._waited += 1
            goal = positions
        return np.array([goal[j] for j in JOINTS], dtype=np.float64)

    def decision(self) -> dict[str, Any]:
        """How the chunks kept up: chunks adopted, inference seconds, steps held for want of a chunk."""
        if self.actor is None:
            return {}
        stats = self.actor.stats
        inference = stats.inference_s or [0.0]
        return {"chunks": stats.chunks, "inference_ms_mean": round(1000 * float(np.mean(inference)), 1),
                "inference_ms_max": round(1000 * max(inference), 1), "first_chunk_step": self._waited,
                "held_steps": stats.held, "skipped_goals": stats.skipped}

    def close(self) -> None:
        if self.actor is not None:
            self.actor.close()


@dataclass(frozen=True)
class So101Embodiment:
    """The SO101 suites' `lerobot_env_config`: LeRobot policy configs (`LeRobotPolicyConfig.make`) load their
    checkpoint as an SO101 policy, by the checkpoint's own features (no LeRobot env config describes the SO101).
    The twin suite (in process, stepped) gets the blocking `So101LeRobotPolicy`; the arm (``chunked``: a control
    loop that must not wait) `So101ChunkedPolicy`, its inference padded to ``min_inference_s``."""

    chunked: bool = False
    min_inference_s: float = 0.0
    refill_at: float = 0.5

    def make_policy(self, config) -> So101LeRobotPolicy:
        if config.max_prompt_tokens is not None:
            raise ValueError("max_prompt_tokens is not supported for SO101 checkpoints yet")
        checkpoint = So101Checkpoint(config.path, device=config.device, policy_type=config.checkpoint_type,
                                     min_inference_s=self.min_inference_s, random_weights=config.random_weights,
                                     weights_sha256=config.weights_sha256, threads=config.threads)
        if self.chunked:
            return So101ChunkedPolicy(checkpoint, config.display_name, self.refill_at)
        return So101LeRobotPolicy(checkpoint, config.display_name)
