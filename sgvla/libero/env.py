"""LIBERO-Spatial simulation backend: LIBERO's robosuite env stepped as LeRobot's LIBERO env steps it, without torch.

Layers:

- :class:`SgvlaLiberoEnv` owns LIBERO's ``OffScreenRenderEnv`` (``env._env``; ``env._env.sim`` is the robosuite
  ``MjSim``, ``.model._model`` / ``.data._data`` the raw MuJoCo structs) and steps it as LeRobot's
  ``lerobot.envs.libero.LiberoEnv`` does with the config ``lerobot-eval`` uses (``pixels_agent_pos`` observations,
  relative control at 20 Hz, LIBERO's initial states, 10 no-op settle steps after each reset), with four additions:
  the task file without removed objects (their initial states projected by joint name), the chosen cameras, a render
  profile, and pose perturbations applied between LIBERO's initial state and the settle steps. It is not LeRobot's
  class: that module imports torch at its top (``torch.load`` of the initial states), and LeRobot's package imports
  its config and processor stack (transformers), about 1.5 GiB resident in every simulator worker that steps no
  learned policy of its own. Here the task list and the initial states are read from LIBERO's files
  (:mod:`sgvla.libero.tasks`, :mod:`sgvla.libero.init_states`), and nothing of LeRobot or torch is imported until a
  policy batch is asked for (:class:`PolicyBatch`). ``tests/sim/test_backend.py`` compares its observations with
  LeRobot's env's, step by step.
- :class:`LiberoBackend` drives one env: ``reset(seed)``, ``step(action)``,
  privileged :meth:`~LiberoBackend.scene` state and per-camera ground-truth graphs.

Observations for policies are exactly what ``lerobot-eval`` feeds them: the
env's observation through ``preprocess_observation``, the task string, and the
env processor (``LiberoProcessorStep``: images rotated 180 degrees, 8-D state).
``Observation.images`` keeps the camera images as LIBERO stores them (rows
bottom-up), the convention of boxes and HDF5 files.

Seeds: ``reset(seed)`` uses LIBERO's initial state ``seed % 50`` (LeRobot uses
the episode index; ``lerobot-eval``'s per-episode seeds cover the states alike)
and seeds perturbation jitter, so a seed always gives the same scene.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import tempfile
import weakref
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from sgvla.scene_graph import ViewGraph
from sgvla.libero.setup import prepare_libero
from sgvla.core.mid_episode import TRIGGERS_KEY, MidEpisodeWatch
from sgvla.libero.init_states import read_init_states
from sgvla.libero.stages import PANDA_STAGES
from sgvla.libero.perturbations import (
    PerturbationSet, TaskPerturbation, apply_change, apply_poses, check_scene, load_perturbations, table_bounds,
)
from sgvla.libero.render import RenderProfile, draw_with_own_context, render_profile
from sgvla.libero.stepping import LeanStep, disable_unread_observables
from sgvla.core.state import Observation, RobotState, SceneState, ground_truth_views
from sgvla.sim.heap import release_free_memory
from sgvla.sim.mujoco_state import (
    CameraRig, ObjectIndex, ObstacleIndex, StateLayout, geom_batch, geom_poses, object_index, object_positions,
    obstacle_boxes, obstacle_index, project_state, state_layout,
)
from sgvla.libero.tasks import MAX_STEPS, SUITE, TaskInfo, task_info

prepare_libero()

from libero.libero.envs.env_wrapper import ControlEnv, OffScreenRenderEnv  # noqa: E402

from sgvla.libero.cameras import DEFAULT_CAMERAS  # noqa: E402

# LeRobot's LIBERO env as `lerobot-eval` makes it (lerobot.envs.configs.LiberoEnv and lerobot.envs.libero);
# tests/sim/test_backend.py holds them equal to LeRobot's.
IMAGE_SIZE = 360  # the config's observation_height and observation_width
CONTROL_FREQ = 20  # Hz: the config's fps, robosuite's control frequency
SETTLE_STEPS = 10  # no-op steps after each reset (LiberoEnv's num_steps_wait)
NO_OP = (0, 0, 0, 0, 0, 0, -1)  # get_libero_dummy_action(): hold still, gripper open
IMAGE_KEYS = ("image", "image2")  # the first and second camera's observation keys (its camera_name_mapping)


@dataclass(frozen=True)
class BackendConfig:
    """One LIBERO-Spatial task. ``image_size`` defaults to LeRobot's LIBERO config (what ``lerobot-eval`` renders).

    ``render_images=False`` skips cameras and the renderer entirely (privileged
    controllers, success-rate runs); graphs still project into ``cameras`` at ``image_size``.
    """

    task_id: int
    render_profile: str = "reference"
    cameras: tuple[str, str] = DEFAULT_CAMERAS
    perturbation: str | Path | PerturbationSet = "none"
    image_size: int = IMAGE_SIZE
    render_images: bool = True
    settle_steps: int = SETTLE_STEPS
    max_steps: int = MAX_STEPS
    # MuJoCo's pipeline once per substep, the success predicate once per step, no unread observables
    # (sgvla.libero.stepping), the policy batch made on first read: the same results bit for bit; False steps
    # the env as LeRobot's does and makes the batch every step.
    lean_step: bool = True


def without_textures(xml: str) -> str:
    """An MJCF without its textures (materials keep their colours): what nothing draws needs none, and physics reads
    none of them."""
    root = ET.fromstring(xml)
    for asset in root.iter("asset"):
        for texture in asset.findall("texture"):
            asset.remove(texture)
    for material in root.iter("material"):
        material.attrib.pop("texture", None)
    return ET.tostring(root, encoding="unicode")


def placeholder_textures(xml: str) -> str:
    """An MJCF whose textures are each one texel of white, by the same names and types: what a scene drawn from a
    render model with the real textures (the ``fast`` profile) compiles for physics. The drawn scene is built
    from the physics model (``mjv_updateScene``: a skybox is drawn only where the model has a skybox texture), the
    texels from the render model's context, so the images stay the same, and the physics model holds no 180 MiB
    of texture data that nothing samples."""
    root = ET.fromstring(xml)
    for texture in root.iter("texture"):
        kept = {key: texture.get(key) for key in ("name", "type") if texture.get(key) is not None}
        texture.attrib.clear()
        texture.attrib.update(kept, builtin="flat", width="1", height="1", rgb1="1 1 1")
    return ET.tostring(root, encoding="unicode")


def compiled(xml: str) -> mujoco.MjModel:
    """The model of an MJCF, as ``MjModel.from_xml_string`` compiles it, less what that keeps: MuJoCo's XML loader
    holds the last parsed scene (every mesh and texture as read, 170 MiB of a LIBERO-Spatial scene without its
    textures, twice that with them) for ``mj_saveLastXML`` until the next load, which nothing here calls. A spec
    compiled here goes with the spec, and the compile's freed memory goes back to the system."""
    model = mujoco.MjSpec.from_string(xml).compile()
    release_free_memory()
    return model


def saved_xml(xml: str, original: str, model: mujoco.MjModel) -> str:
    """robosuite's ``MjModel.get_xml`` (what demonstrations and annotations record) for a model `compiled` from
    ``xml``, a transform of robosuite's ``original`` MJCF: ``mj_saveLastXML`` writes MuJoCo's last loaded scene
    with ``model``'s values copied back (robosuite's placements and hidden sites; only onto the scene ``model`` was
    compiled from), so ``xml`` is loaded first, as robosuite's own compile did, and a placeholder-textured scene
    gets its textures back from ``original`` (a scene without textures keeps none, as since 8d2e88f). Only where a
    scene is recorded, never in an evaluation worker."""
    mujoco.MjModel.from_xml_string(xml)
    with tempfile.TemporaryDirectory(prefix="sgvla_xml_") as folder:
        path = Path(folder) / "model.xml"
        mujoco.mj_saveLastXML(str(path), model)
        saved = path.read_text(encoding="utf-8")
    root = ET.fromstring(saved)
    textures, sources = list(root.iter("texture")), list(ET.fromstring(original).iter("texture"))
    if xml is original or len(textures) != len(sources):
        return saved
    for texture, source in zip(textures, sources):  # placeholder_textures keeps every texture, in order
        texture.attrib.clear()
        texture.attrib.update(source.attrib)
    return ET.tostring(root, encoding="unicode")


@contextlib.contextmanager
def compiled_with(transform: Callable[[str], str] | None = None) -> Iterator[None]:
    """robosuite compiles a scene from its MJCF in the env's constructor (and again at each hard reset) with no hook
    before the first compile: meanwhile, its ``MjSim.from_xml_string`` compiles ``transform(MJCF)`` (the MJCF
    itself by default) with `compiled`; with `without_textures` for a simulator that renders no image: a
    LIBERO-Spatial scene's textures (its bowls' and plate's are 4096x4096) hold 180 MiB of the 256 MiB model and
    cost 380 MiB resident with their decoding, more than a simulator that renders no image needs in all."""
    from robosuite.utils.binding_utils import MjSim

    def from_xml_string(cls, xml: str) -> MjSim:
        made = transform(xml) if transform else xml
        sim = cls(compiled(made))
        sim.model.get_xml = partial(saved_xml, made, xml, sim.model._model)
        return sim

    compile_ = MjSim.__dict__["from_xml_string"]
    MjSim.from_xml_string = classmethod(from_xml_string)
    try:
        yield
    finally:
        MjSim.from_xml_string = compile_


_RENDERING: weakref.WeakSet[SgvlaLiberoEnv] = weakref.WeakSet()


@cache
def _close_rendering_envs_at_exit() -> None:
    """Close the envs still open when the process ends, before robosuite ends EGL: robosuite registers
    ``eglTerminate`` at exit when it makes the process's first GL context, so it runs before any closer registered
    earlier (a pool worker's), and its render contexts, freed after it, printed an ``EGL_NOT_INITIALIZED``
    traceback per context at every rendering worker's exit. Registered right after that first context, this runs
    first."""
    atexit.register(lambda: [env.close() for env in list(_RENDERING)])


@cache
def _full_layout(bddl_file: Path) -> StateLayout:
    """Joint layout of the unmodified task scene, to project its initial states onto a reduced scene."""
    with compiled_with(without_textures):
        env = ControlEnv(bddl_file_name=str(bddl_file), use_camera_obs=False, has_offscreen_renderer=False)
    try:
        return state_layout(env.sim.model._model)
    finally:
        env.close()


class SgvlaLiberoEnv:
    """One task's LIBERO simulator, stepped as LeRobot's ``LiberoEnv`` steps it, with object removal, camera choice,
    a render profile and pose perturbations (see the module docstring)."""

    def __init__(self, task: TaskInfo, perturbation: TaskPerturbation, profile: RenderProfile,
                 cameras: Sequence[str], image_size: int, render_images: bool, settle_steps: int,
                 lean_step: bool = True) -> None:
        self.task_info = task
        self.task_id = task.task_id
        self.task_description = task.language if perturbation.prompt is None else perturbation.prompt
        self.perturbation = perturbation
        self.profile = profile
        self.cameras = tuple(cameras)
        self.render_images = render_images
        self.lean_step = lean_step
        if not profile.hard_reset:
            # MuJoCo's asset cache keeps a copy of every texture and mesh compiled for the next compile (230 MiB of a
            # LIBERO-Spatial scene: its bowls and plate have 4096x4096 textures). A soft-resetting env compiles its
            # scene once per task, so this process keeps none; a hard-resetting one recompiles at every reset, where
            # the cache saves seconds per episode.
            mujoco.mj_setCacheCapacity(mujoco.mj_getCache(), 0)
        # The cameras' observables and their keys in the observation; no images, no cameras read.
        self.camera_name = [f"{c}_image" for c in self.cameras] if render_images else []
        self.camera_name_mapping = dict(zip((f"{c}_image" for c in self.cameras), IMAGE_KEYS))
        self.observation_height = self.observation_width = image_size
        self.control_freq = CONTROL_FREQ
        self.hard_reset = profile.hard_reset
        self.num_steps_wait = settle_steps
        self._init_states = read_init_states(task.init_states_file)
        self._task_bddl_file = str(task.bddl_file)
        self._tmpdir: tempfile.TemporaryDirectory | None = None
        if perturbation.remove:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="sgvla_bddl_")
            reduced = Path(self._tmpdir.name) / task.bddl_file.name
            reduced.write_text(task.problem.without(set(perturbation.remove)), encoding="utf-8")
            self._task_bddl_file = str(reduced)
        self._env: OffScreenRenderEnv | ControlEnv | None = None  # built at the first reset
        self.index: ObjectIndex | None = None
        self.obstacle_index: ObstacleIndex | None = None
        self.init_state_index = -1

    def _ensure_env(self) -> None:
        if self._env is not None:
            return
        kwargs = dict(bddl_file_name=self._task_bddl_file, camera_names=list(self.cameras),
                      camera_heights=self.observation_height, camera_widths=self.observation_width,
                      control_freq=self.control_freq, hard_reset=self.hard_reset)
        with self._compiling():
            if self.render_images:
                env = OffScreenRenderEnv(**kwargs)
            else:
                env = ControlEnv(**kwargs, use_camera_obs=False, has_offscreen_renderer=False)
            env.reset()
        self._env = env
        if self.render_images:
            _RENDERING.add(self)
            _close_rendering_envs_at_exit()
        if self.lean_step:
            disable_unread_observables(env.env, self.cameras if self.render_images else ())
        reduced = state_layout(env.sim.model._model)
        if self._init_states.shape[1] != 1 + reduced.nq + reduced.nv:  # objects removed: project by joint name
            full = _full_layout(self.task_info.bddl_file)
            self._init_states = np.stack([project_state(s, full, reduced) for s in self._init_states])

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        """LeRobot's reset (initial state, no-op settle steps) with pose perturbations before the settle; the
        observation."""
        self._ensure_env()
        seed = 0 if seed is None else int(seed)
        self._env.seed(seed)
        with self._compiling():  # a hard reset compiles the scene again
            self._env.reset()
        # robosuite's soft reset keeps the gripper model, whose command accumulates (PandaGripper.current_action):
        # the previous episode's grip shaped this one's settle steps (the end effector 1e-5 m off at the first
        # step), so a seed started differently after another episode in the same process (other action digests).
        for robot in self._env.robots:
            robot.gripper.current_action = np.zeros(robot.gripper.dof)
        draw_with_own_context(self._env.sim)
        self.profile.apply(self._env.sim, self._env.env.model.get_xml, self.cameras, self.observation_height)
        sim = self._env.sim
        self.index = object_index(sim.model._model)
        self.obstacle_index = obstacle_index(sim.model._model, self.index)
        self.init_state_index = seed % len(self._init_states)
        raw_obs = self._env.set_init_state(self._init_states[self.init_state_index])
        if self.perturbation.poses:
            model, data = sim.model._model, sim.data._data
            apply_poses(model, data, self.index, self.perturbation, np.random.default_rng(seed))
            check_scene(model, data, self.index, self.task_info.problem.goal_objects, bool(self._env.check_success()),
                        f"task {self.task_id} seed {seed}")
        for _ in range(self.num_steps_wait):
            with self._stepping():
                raw_obs, _, _, _ = self._env.step(list(NO_OP))
        for robot in self._env.robots:
            robot.controller.use_delta = True  # relative control, LeRobot's control_mode
        return self._format_raw_obs(raw_obs)

    def _compiling(self) -> contextlib.AbstractContextManager:
        if not self.render_images:
            return compiled_with(without_textures)
        if self.profile.decimated_meshes:  # drawn from a render model, which has the textures
            return compiled_with(placeholder_textures)
        return compiled_with()

    def _stepping(self) -> contextlib.AbstractContextManager:
        return LeanStep(self._env.env) if self.lean_step else contextlib.nullcontext()

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], bool]:
        """LeRobot's step (the action, then LIBERO's success check), inside :class:`~sgvla.libero.stepping.LeanStep`
        unless ``lean_step`` is off; the observation and whether the task is done."""
        self._ensure_env()
        if action.ndim != 1:
            raise ValueError(f"a LIBERO action is one 7-D vector, got shape {action.shape}")
        with self._stepping():
            raw_obs, _, _, _ = self._env.step(action)
            success = bool(self._env.check_success())
            return self._format_raw_obs(raw_obs), success

    def _format_raw_obs(self, raw_obs: Mapping[str, Any]) -> dict[str, Any]:
        """LeRobot's ``pixels_agent_pos`` observation: the cameras' images under ``image``/``image2`` and the robot's
        state (end effector pose, with the controller's rotation matrix, gripper and arm joints)."""
        images = {self.camera_name_mapping[camera]: raw_obs[camera] for camera in self.camera_name}
        eef_pos, eef_quat, gripper_qpos = (raw_obs.get(k) for k in
                                           ("robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos"))
        if eef_pos is None or eef_quat is None or gripper_qpos is None:
            raise ValueError(f"LIBERO's observation lacks the robot's state: eef_pos {eef_pos is not None}, "
                             f"eef_quat {eef_quat is not None}, gripper_qpos {gripper_qpos is not None}")
        return {"pixels": images, "robot_state": {
            "eef": {"pos": eef_pos, "quat": eef_quat, "mat": self._env.robots[0].controller.ee_ori_mat},
            "gripper": {"qpos": gripper_qpos, "qvel": raw_obs.get("robot0_gripper_qvel")},
            "joints": {"pos": raw_obs.get("robot0_joint_pos"), "vel": raw_obs.get("robot0_joint_vel")}}}

    def close(self) -> None:
        if self._env is not None:
            try:
                self._env.close()
            finally:
                self._env = None  # LIBERO deletes its inner env on close: a later reset builds a new one
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None


def _batched(tree: Any) -> Any:
    """Add the leading env axis a gymnasium vector env gives every array (what LeRobot's processors expect)."""
    if isinstance(tree, dict):
        return {k: _batched(v) for k, v in tree.items()}
    return np.asarray(tree)[None]


class PolicyBatch(Mapping):
    """A policy's batch (``Observation.policy``), made on first read: LeRobot's preprocessing converts every
    observation to tensors, which scripted runs never read. The raw observation it is made from is never changed
    after the step that returned it, so a later read gives what an immediate one would have."""

    def __init__(self, make: Callable[[], dict[str, Any]]) -> None:
        self._make: Callable[[], dict[str, Any]] | None = make
        self._batch: dict[str, Any] = {}

    def made(self) -> dict[str, Any]:
        """The batch, made now if it was not yet."""
        if self._make is not None:
            self._batch, self._make = self._make(), None
        return self._batch

    def __getitem__(self, key: str) -> Any:
        return self.made()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.made())

    def __len__(self) -> int:
        return len(self.made())


class LiberoBackend:
    """One LIBERO-Spatial task: LeRobot observations, success, privileged state and ground-truth graphs."""

    def __init__(self, config: BackendConfig) -> None:
        self.config = config
        self.task_info = task_info(config.task_id)
        perturbations = config.perturbation
        if not isinstance(perturbations, PerturbationSet):
            perturbations = load_perturbations(perturbations)
        self.perturbations = perturbations
        self.perturbation = perturbations.for_task(config.task_id)
        self.cameras: tuple[str, str] = self.perturbation.cameras or tuple(config.cameras)  # type: ignore[assignment]
        self.env = SgvlaLiberoEnv(self.task_info, self.perturbation, render_profile(config.render_profile),
                                  self.cameras, config.image_size, config.render_images, config.settle_steps,
                                  config.lean_step)
        self._env_preprocessor: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # LeRobot's, when first needed
        self.max_steps = config.max_steps
        self.steps = 0
        self._rig: CameraRig | None = None
        self._last: dict[str, Any] | None = None  # the last raw observation
        self._seed = 0
        # The perturbation's mid-episode changes: when their triggers fire (sgvla.core.mid_episode), step applies them.
        self.mid_episode: MidEpisodeWatch | None = None

    @property
    def task(self) -> str:
        """The prompt policies get: LIBERO's task language, or the perturbation's override."""
        return self.env.task_description

    @property
    def sim(self):
        """robosuite ``MjSim`` of the current episode (rebuilt by hard resets)."""
        return self.env._env.sim

    def reset(self, seed: int) -> Observation:
        raw = self.env.reset(seed=seed)
        self.steps, self._seed = 0, int(seed)
        model = self.sim.model._model
        self._rig = CameraRig(model, self.cameras, self.config.image_size, self.config.image_size)
        self.mid_episode = None
        if self.perturbation.during:
            self.mid_episode = MidEpisodeWatch([c.when for c in self.perturbation.during], PANDA_STAGES,
                                               self.task_info.problem.goal_placements[0])
        return self._observation(raw)

    def step(self, action: np.ndarray) -> tuple[Observation, bool, bool]:
        """Apply one 7-D action; returns (observation, success, done). Done on success or after ``max_steps``."""
        if self._rig is None:
            raise RuntimeError("call reset(seed) before step()")
        self._apply_mid_episode()
        raw, success = self.env.step(np.asarray(action, dtype=np.float64).reshape(-1))
        self.steps += 1
        return self._observation(raw), success, success or self.steps >= self.max_steps

    def _apply_mid_episode(self) -> None:
        """The mid-episode changes whose triggers fire at the current scene (the one the policy just acted on),
        applied before the action; the engine's watch records the same steps from the same scenes."""
        watch = self.mid_episode
        if watch is None or not watch.pending:
            return
        for i in watch.observe(self.steps, self.scene()):
            sim = self.sim
            apply_change(sim.model._model, sim.data._data, self.env.index, self.perturbation.during[i],
                         self.perturbation.settle_steps, np.random.default_rng((self._seed, self.steps, i)))

    def _observation(self, raw: dict[str, Any]) -> Observation:
        self._last = raw
        images = {cam: raw["pixels"][key] for cam, key in zip(self.cameras, IMAGE_KEYS) if key in raw["pixels"]}
        policy = PolicyBatch(lambda: self._policy_batch(raw))
        if not self.config.lean_step:
            policy.made()  # every step, as LeRobot's evaluation loop makes it
        return Observation(policy, images, raw, self.task)

    def _policy_batch(self, raw: dict[str, Any]) -> dict[str, Any]:
        """What ``lerobot-eval`` feeds a policy: the observation through ``preprocess_observation``, the task, the
        env processor of LeRobot's LIBERO config. LeRobot (and torch with it) is imported here, by the first batch a
        policy of this process reads: a worker whose policies are served or scripted never reads one."""
        from lerobot.envs.utils import preprocess_observation

        if self._env_preprocessor is None:
            from lerobot.envs.configs import LiberoEnv as LiberoEnvConfig

            size = self.config.image_size
            config = LiberoEnvConfig(task=SUITE, observation_height=size, observation_width=size)
            self._env_preprocessor = config.get_env_processors()[0]
        policy = preprocess_observation(_batched(raw))
        policy["task"] = [self.task]
        return self._env_preprocessor(policy)

    def scene(self) -> SceneState:
        if self._rig is None or self.env.index is None:
            raise RuntimeError("call reset(seed) before scene()")
        data = self.sim.data._data
        model = self.sim.model._model
        index = self.env.index
        centers, rotations = geom_poses(data, index)
        robot = self.env._env.robots[0]
        return SceneState(
            objects=index.names,
            positions=object_positions(data, index),
            geoms=geom_batch(model, index, centers[None], rotations[None]),
            cameras=self._rig.cameras(data),
            eef_pos=np.array(data.site_xpos[robot.eef_site_id]),
            eef_mat=np.array(data.site_xmat[robot.eef_site_id]).reshape(3, 3),
            gripper_qpos=np.array(data.qpos[robot._ref_gripper_joint_pos_indexes]),
            task=self.task_info.language,
            obstacles=obstacle_boxes(data, self.env.obstacle_index),
        )

    def ground_truth(self, views: Sequence[str] | None = None, scene: SceneState | None = None) -> dict[str, ViewGraph]:
        """Graph and boxes per camera (default: the observed cameras) for the current instant."""
        scene = scene or self.scene()
        cameras = scene.cameras
        if views is not None:
            missing = [v for v in views if v not in cameras]
            if missing:
                rig = CameraRig(self.sim.model._model, missing, self.config.image_size, self.config.image_size)
                cameras = {**cameras, **rig.cameras(self.sim.data._data)}
            scene = dataclasses.replace(scene, cameras={v: cameras[v] for v in views})
        return ground_truth_views(scene)

    def robot_state(self) -> RobotState:
        """The Panda's joints (arm, then fingers) and end effector, as its joint state and kinematics report them."""
        if self._last is None:
            raise RuntimeError("call reset(seed) before robot_state()")
        robot = self.env._env.robots[0]
        state = self._last["robot_state"]
        names = (*robot.robot_joints, *getattr(robot.gripper, "joints", []))
        return RobotState(tuple(names), np.r_[state["joints"]["pos"], state["gripper"]["qpos"]],
                          np.r_[state["joints"]["vel"], state["gripper"]["qvel"]],
                          np.asarray(state["eef"]["pos"]), np.asarray(state["eef"]["quat"]))

    def camera_intrinsics(self) -> dict[str, np.ndarray]:
        """K per observed camera at the rendered image size."""
        return {} if self._rig is None else {cam: self._rig.intrinsics(cam) for cam in self._rig.names}

    @property
    def control_period_s(self) -> float:
        return 1.0 / float(self.env.control_freq)

    @property
    def settle_steps(self) -> int:
        """Simulator steps every reset takes before the first observation (LeRobot's num_steps_wait)."""
        return int(self.config.settle_steps)

    def record_facts(self) -> dict[str, Any]:
        """What every record of this task states about how it ran: the perturbation as applied."""
        facts = {"perturbation_applied": self.perturbation.describe()}
        return {**facts, TRIGGERS_KEY: self.perturbation.triggers} if self.perturbation.during else facts

    def episode_info(self) -> dict[str, Any]:
        """The task's goal (target, place) and the table's centre, for scripted policies."""
        lower, upper = table_bounds(self.sim.model._model, self.sim.data._data)
        info = {"goal": self.task_info.problem.goal_placements[0], "table_center": (lower + upper) / 2}
        return {**info, TRIGGERS_KEY: self.perturbation.triggers} if self.perturbation.during else info

    def pick_place(self, target: str, place: str):
        """The Panda's scripted pick-and-place (:class:`sgvla.libero.expert.PickPlaceController`)."""
        from sgvla.libero.expert import PickPlaceController

        return PickPlaceController(target, place)

    def close(self) -> None:
        self.env.close()

    def __enter__(self) -> LiberoBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_backend(task_id: int, **overrides: Any) -> LiberoBackend:
    """``LiberoBackend(BackendConfig(task_id, **overrides))``."""
    return LiberoBackend(BackendConfig(task_id=task_id, **overrides))
