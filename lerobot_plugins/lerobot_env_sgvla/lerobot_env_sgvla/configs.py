"""sgvla's suites as LeRobot env types: ``--env.type=sgvla_libero`` and ``--env.type=sgvla_so101_twin``.

Each is a registered `EnvConfig` whose options are sgvla's evaluation choices for one suite: the tasks, the context
mode (`standard`, `scene_graph`, the controls `filler`, `wrong_graph`, `shuffled_graph`, ...: every registered
`ContextMode`), the graph source (`ground_truth`, `vlm`, `fiducial`: every registered `GraphSourceConfig`, with its
options), the perturbation set, the episode length, the image size. The options are checked when the config is built
by building the sgvla plan they amount to (`plan()`, an `sgvla.eval.config.EvalConfig`; a graph source's own options
are read by sgvla's config loader), so a bad option fails with the message `sgvla eval` gives, naming the valid
choices; what the options alone cannot tell (a VLM client's file) is checked as `sgvla eval` checks it, before the
envs are made. `create_envs` gives LeRobot's `{type: {task_id: vector env}}` of `lerobot_env_sgvla.env.SgvlaEnv`.

Observations follow LeRobot's conventions for the embodiment: ``sgvla_libero`` is LeRobot's ``libero`` env
(``pixels`` ``image``/``image2``, ``robot_state``; the same features, features map and env processors: LeRobot
LIBERO policies fit it); ``sgvla_so101_twin`` gives ``agent_pos`` and takes actions in LeRobot's SO101 units
(degrees, gripper 0..100) and ``pixels`` per camera (upright), as `sgvla record` writes SO101 datasets.

The noise (``seed_noise``). A flow-matching policy (SmolVLA, pi0, pi05) starts each chunk from Gaussian noise.
`sgvla eval` draws it from a generator of each episode, seeded by the episode's seed
(`sgvla.policies.lerobot_vla.episode_noise`), so an episode's actions depend on its seed alone, not on what ran
before it or shares its batch. LeRobot's loop draws it with `sample_noise` from torch's global generator, seeded once
per run by ``--seed``: episode k's noise follows the draws of episodes 0..k-1. With
``seed_noise`` the env seeds that global generator with the episode's seed at the end of every reset (LeRobot's
rollout: ``policy.reset()``, ``env.reset(seed=...)``, then ``select_action``), and the global draw after
``torch.manual_seed(seed)`` is the seeded generator's draw, bit for bit on the CPU (the same call on the same
device), so both loops give each episode the same noise, chunk after chunk, and the same actions.

It holds at ``--eval.batch_size=1`` with ``max_parallel_tasks=1``, when nothing else in lerobot-eval's process draws
from torch's global generator between chunks (LeRobot's loop, its processors and these policies' inference draw
nothing else; sgvla's graph sources decode greedily). A batch of envs draws one noise tensor for all its episodes
and parallel tasks share the generator: both are refused with one line, never a silent mismatch.

Off by default: reseeding a process-wide generator from inside an env is a side effect a LeRobot user does not
expect from ``--env.*``, it changes what ``--seed`` means for the policy, and it would refuse LeRobot's usual
``--eval.batch_size`` > 1. Turn it on to compare a flow-matching policy's actions with `sgvla eval`'s (`sgvla
compare`); deterministic policies (ACT, the scripted ones) match without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.envs.configs import EnvConfig
from lerobot.envs.configs import LiberoEnv as LeRobotLiberoEnv
from lerobot.utils.constants import ACTION, OBS_IMAGES, OBS_STATE

import sgvla.plugins  # noqa: F401  every registered suite, context mode and graph source
from sgvla.core.config import from_mapping, parse_line
from sgvla.core.context import ContextMode
from sgvla.core.graph_source import GraphSourceConfig
from sgvla.eval.config import EvalConfig
from sgvla.eval.suite import SuiteConfig
from sgvla.scene_graph.serialize import STYLES


@dataclass
class SgvlaEnvConfig(EnvConfig):
    """What the sgvla env types share; a subclass names its suite (`suite_config`) and LeRobot's conventions for
    its observations and actions (`observation`, `backend_action`, `spaces`, features)."""

    task_ids: list[int] | None = None  # None: every task of the suite
    context_mode: str = "standard"  # a registered sgvla context mode
    graph_source: str = "ground_truth"  # a registered sgvla graph source
    # Its options as sgvla's key=value items in one string (values read as YAML), e.g. for graph_source=vlm
    # "client=qwen2_5_vl_7b rate_hz=2"; "": its defaults.
    graph_source_options: str = ""
    perturbation: str = ""  # a perturbation set of the suite; "": the suite's default set (as `sgvla eval`)
    episode_length: int | None = None  # steps; None: the suite's limit
    view: str = ""  # the camera whose graph the prompt shows; "": the suite's agent view
    context_style: str = "reference"  # how the graph is written into the prompt (sgvla's serializer styles)
    records: str = ""  # a JSONL file: each episode's sgvla record is appended there ("": none)
    policy_name: str = "lerobot"  # the policy's name in those records
    record_actions: bool = False  # the records also hold every action the env was given (`actions`, as stepped)
    # The observation also holds the scene and the episode's facts sgvla's scripted policies read
    # (`lerobot_env_sgvla.privileged`): what `--policy.type=sgvla_expert` / `sgvla_prompt_grounded` need.
    privileged: bool = False
    # A LeRobot policy (directory or hub id; normally the --policy.path) whose tokenizer counts the prompt's tokens, as
    # `sgvla eval` counts them with the policy it runs: the filler's length, the records' prompt_tokens/prompt_budget/
    # triplets_kept/prompt_truncated. "": words are counted, no budget is recorded.
    tokenizer_from: str = ""
    # Each reset seeds torch's global generator with the episode's seed, so a flow-matching policy (SmolVLA, pi0,
    # pi05) draws the noise `sgvla eval` draws for that episode (the module docstring says where that holds and
    # why it is off by default).
    seed_noise: bool = False

    def __post_init__(self) -> None:
        self.plan()  # every option checked, with the valid choices in the message
        if self.seed_noise and self.max_parallel_tasks > 1:
            raise ValueError(f"seed_noise needs max_parallel_tasks=1 (got {self.max_parallel_tasks}): tasks run in "
                             "parallel threads share torch's global generator, so one task's draws would shift "
                             "another's noise")
        if self.tokenizer_from:
            from sgvla.policies.checkpoint import checkpoint_path

            checkpoint_path(self.tokenizer_from)  # a missing directory is named now

    def suite_config(self) -> SuiteConfig:
        raise NotImplementedError

    def plan(self) -> EvalConfig:
        """The sgvla evaluation plan these options amount to (one context mode; no policy of sgvla's runs)."""
        ContextMode.choice(self.context_mode)
        if self.context_style not in STYLES:
            raise ValueError(f"unknown context_style {self.context_style!r}; choose from {list(STYLES)}")
        options = parse_line(self.graph_source_options, "graph_source_options item")
        source = from_mapping(GraphSourceConfig, {"type": self.graph_source, **options}, "env.graph_source")
        return EvalConfig(suite=self.suite_config(), tasks=self.task_ids, perturbations=self.perturbation,
                          modes=[self.context_mode], graph_source=source, view=self.view,
                          context_style=self.context_style, max_steps=self.episode_length,
                          policies=[_loop_policy()], output_dir="-")

    @property
    def gym_kwargs(self) -> dict:
        return {}

    def create_envs(self, n_envs: int, use_async_envs: bool = False) -> dict[str, dict[int, gym.vector.VectorEnv]]:
        """One vector env of `n_envs` sub-envs per task, as LeRobot's LIBERO env makes them."""
        from lerobot_env_sgvla.env import make_sgvla_env

        from sgvla.eval.runner import validate

        if n_envs < 1:
            raise ValueError(f"n_envs must be >= 1, got {n_envs}")
        if self.seed_noise and n_envs > 1:
            raise ValueError(f"seed_noise needs --eval.batch_size=1 (got {n_envs}): a batch of envs draws one noise "
                             "tensor for all its episodes from torch's global generator, which one seed per episode "
                             "cannot give")
        plan = self.plan()
        validate(plan)  # the graph source's environment (a VLM client's file, its API key), as `sgvla eval` does
        envs = {}
        for task_id in plan.tasks:
            fns = [partial(make_sgvla_env, self, task_id) for _ in range(n_envs)]
            if use_async_envs and n_envs > 1:
                envs[task_id] = gym.vector.AsyncVectorEnv(fns, context="forkserver",
                                                          autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
            else:
                envs[task_id] = gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
        return {self.type: envs}

    def observation(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The backend's raw observation as the env returns it."""
        return raw

    def backend_action(self, action: np.ndarray) -> np.ndarray:
        """The env's action as the backend takes it."""
        return np.asarray(action, dtype=np.float64).reshape(-1)

    def env_action(self, backend_action: np.ndarray) -> np.ndarray:
        """A backend's action (a scripted policy's, `lerobot_policy_sgvla`) in the env's units: `backend_action`'s
        inverse."""
        return np.asarray(backend_action, dtype=np.float64).reshape(-1)

    def spaces(self, backend: Any) -> tuple[spaces.Space, spaces.Space]:
        raise NotImplementedError


def _loop_policy():
    """The plan's policy entry: sgvla runs none (LeRobot's loop steps it); `hold` reads nothing a suite lacks."""
    from sgvla.policies.registry import PolicyConfig

    return PolicyConfig.choice("hold")()


@EnvConfig.register_subclass("sgvla_libero")
@dataclass
class SgvlaLiberoEnvConfig(SgvlaEnvConfig):
    """LIBERO-Spatial as `sgvla eval` runs it (`libero_spatial` suite), with LeRobot's ``libero`` observations."""

    task: str | None = "libero_spatial"
    fps: int = 20  # robosuite's control frequency, as LeRobot's libero env
    image_size: int = 256  # sgvla's libero_spatial default
    render_profile: str = "reference"  # reference: what learned policies were trained on; fast: cheaper rendering
    features: dict[str, PolicyFeature] = field(default_factory=dict)
    features_map: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        libero = self.lerobot_libero()
        self.features = dict(libero.features)
        self.features_map = dict(libero.features_map)

    def suite_config(self) -> SuiteConfig:
        if self.render_profile not in ("reference", "fast"):
            raise ValueError(f"unknown render_profile {self.render_profile!r}; choose from ['reference', 'fast']")
        return SuiteConfig.choice("libero_spatial")(render_profile=self.render_profile, image_size=self.image_size)

    def lerobot_libero(self) -> LeRobotLiberoEnv:
        """LeRobot's own libero env config at this image size: its features and env processors are this env's."""
        return LeRobotLiberoEnv(task="libero_spatial", observation_height=self.image_size,
                                observation_width=self.image_size)

    def get_env_processors(self):
        return self.lerobot_libero().get_env_processors()

    def spaces(self, backend: Any) -> tuple[spaces.Space, spaces.Space]:
        """LeRobot's ``LiberoEnv``'s spaces (``pixels_agent_pos``; sgvla's LIBERO backend steps LIBERO as that env
        does, without being it: `sgvla.libero.env`)."""
        size = backend.config.image_size
        images = {key: spaces.Box(0, 255, (size, size, 3), np.uint8) for key in ("image", "image2")}

        def box(*shape: int) -> spaces.Box:
            return spaces.Box(-np.inf, np.inf, shape, np.float64)

        state = spaces.Dict({"eef": spaces.Dict({"pos": box(3), "quat": box(4), "mat": box(3, 3)}),
                             "gripper": spaces.Dict({"qpos": box(2), "qvel": box(2)}),
                             "joints": spaces.Dict({"pos": box(7), "vel": box(7)})})
        observation = spaces.Dict({"pixels": spaces.Dict(images), "robot_state": state})
        return observation, spaces.Box(-1.0, 1.0, (7,), np.float32)


@EnvConfig.register_subclass("sgvla_so101_twin")
@dataclass
class SgvlaSo101TwinEnvConfig(SgvlaEnvConfig):
    """The SO101 MuJoCo twin's five tasks (`so101_twin` suite): ``agent_pos`` and actions in LeRobot's SO101 units
    (degrees, gripper 0..100, JOINTS order), ``pixels`` per camera, upright."""

    task: str | None = "so101_twin"
    fps: int = 30
    image_size: int | None = None  # square images; None: the twin config's camera size (640x480)
    perception: bool = False  # objects perceived from their markers (then graph_source=fiducial)
    features: dict[str, PolicyFeature] = field(default_factory=dict)
    features_map: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        from sgvla.so101.hardware.joints import JOINTS

        width, height = self.image_shape()
        self.features = {ACTION: PolicyFeature(type=FeatureType.ACTION, shape=(len(JOINTS),)),
                         "agent_pos": PolicyFeature(type=FeatureType.STATE, shape=(len(JOINTS),))}
        self.features_map = {ACTION: ACTION, "agent_pos": OBS_STATE}
        for camera in self.suite_config().rendered():
            self.features[f"pixels/{camera}"] = PolicyFeature(type=FeatureType.VISUAL, shape=(height, width, 3))
            self.features_map[f"pixels/{camera}"] = f"{OBS_IMAGES}.{camera}"

    def suite_config(self) -> SuiteConfig:
        return SuiteConfig.choice("so101_twin")(image_size=self.image_size, perception=self.perception)

    def image_shape(self) -> tuple[int, int]:
        """(width, height) of the cameras' images."""
        from sgvla.so101.twin.config import load_twin_config

        if self.image_size is not None:
            return self.image_size, self.image_size
        config = load_twin_config()
        return config.image_width, config.image_height

    def observation(self, raw: dict[str, Any]) -> dict[str, Any]:
        from sgvla.so101.hardware.joints import JOINTS, from_radians

        degrees = from_radians(JOINTS, list(raw["agent_pos"]))
        return {"agent_pos": np.array([degrees[j] for j in JOINTS], dtype=np.float32), "pixels": dict(raw["pixels"])}

    def backend_action(self, action: np.ndarray) -> np.ndarray:
        from sgvla.so101.hardware.joints import JOINTS, to_radians

        values = np.asarray(action, dtype=np.float64).reshape(-1)
        if values.shape != (len(JOINTS),):
            raise ValueError(f"an SO101 action is {len(JOINTS)} joint goals {list(JOINTS)}, got shape {values.shape}")
        return np.array(to_radians(dict(zip(JOINTS, map(float, values)))))

    def env_action(self, backend_action: np.ndarray) -> np.ndarray:
        from sgvla.so101.hardware.joints import JOINTS, from_radians

        degrees = from_radians(JOINTS, [float(v) for v in np.asarray(backend_action, dtype=np.float64).reshape(-1)])
        return np.array([degrees[j] for j in JOINTS])

    def spaces(self, backend: Any) -> tuple[spaces.Space, spaces.Space]:
        from sgvla.so101.hardware.joints import JOINTS

        width, height = self.image_shape()
        images = {camera: spaces.Box(0, 255, (height, width, 3), np.uint8) for camera in self.suite_config().rendered()}
        joints = spaces.Box(-np.inf, np.inf, (len(JOINTS),), np.float32)
        return spaces.Dict({"agent_pos": joints, "pixels": spaces.Dict(images)}), joints
