"""The SO101 twin as an evaluation backend: what `sgvla.eval.loop` drives, like `LiberoBackend`.

An action is the six joint position targets in radians (``JOINTS`` order), held for one control
period. Observations carry the joint positions and, when rendering, the upright camera images; learned policies
read that raw observation (`sgvla.so101.learned` maps it to their dataset's features), ``Observation.policy`` is
empty.

With ``perception=True`` (the suite's ``perception: true``) the backend perceives its objects from their fiducial
markers every step (`sgvla.so101.twin.perceived`): :meth:`TwinBackend.scene` is the perceived scene, never the
simulator's object state, while ``ground_truth()`` without a scene and success stay the simulator's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from sgvla.so101.hardware.joints import JOINTS
from sgvla.scene_graph import ViewGraph
from sgvla.core.state import Observation, RobotState, SceneState
from sgvla.so101.twin.config import DEFAULT_CONFIG, TARGET, load_twin_config
from sgvla.core.mid_episode import TRIGGERS_KEY, MidEpisodeWatch
from sgvla.so101.twin.perturbations import NONE, apply_change, load_perturbations
from sgvla.so101.twin.stages import so101_stages
from sgvla.so101.twin.pick_place import TwinPickPlace
from sgvla.so101.twin.twin import So101Twin

DEFAULT_MAX_STEPS = 300  # 10 s at the rig's 30 Hz; the scripted pick-and-place needs about 6


class TwinBackend:
    """One twin task under a perturbation set (``none``, or a file of config/perturbations/so101_twin/): reset(seed),
    step(action), privileged scene, ground-truth graphs, success of the target bowl."""

    def __init__(self, task_id: int, config: str | Path = DEFAULT_CONFIG, image_size: int | None = None,
                 render_images: bool = True, max_steps: int = DEFAULT_MAX_STEPS, perturbation: str = NONE,
                 perception: bool = False) -> None:
        overrides = {"image_width": image_size, "image_height": image_size} if image_size else None
        twin_config = load_twin_config(config, overrides)
        self.perturbations = perturbations = load_perturbations(perturbation, twin_config)
        self.perturbation = perturbations.for_task(task_id)
        # MuJoCo's asset cache would keep a copy of every mesh compiled (115 MiB of the twin's) for the next compile;
        # the twin compiles once per task (its render model once more), so this process keeps none: a simulator
        # worker peaks at 300 MiB instead of 420 and holds 180 MiB after its build instead of 360.
        mujoco.mj_setCacheCapacity(mujoco.mj_getCache(), 0)
        self.twin = So101Twin(twin_config, task_id, perturbations.layout(twin_config, task_id))
        self.task_id = task_id
        self.render_images = render_images
        self.max_steps = max_steps
        self.steps = 0
        # The perturbation's mid-episode changes: when their triggers fire (sgvla.core.mid_episode), step applies them.
        self.mid_episode: MidEpisodeWatch | None = None
        self.perception = None
        if perception:
            from sgvla.so101.twin.perceived import TwinPerception

            self.perception = TwinPerception(self.twin)

    @property
    def task(self) -> str:
        return self.twin.task

    def reset(self, seed: int) -> Observation:
        self.twin.reset(seed)
        self.steps = 0
        self.mid_episode = None
        if self.perturbation.during:
            self.mid_episode = MidEpisodeWatch([c.when for c in self.perturbation.during], so101_stages(),
                                               (TARGET, self.twin.layout.place))
        if self.perception is not None:
            self.perception.reset()
        return self._observation()

    def step(self, action: np.ndarray) -> tuple[Observation, bool, bool]:
        """Apply six joint targets (radians, JOINTS order) for one control period; returns (observation, success, done)."""
        action = np.asarray(action, dtype=np.float64).reshape(-1)
        if action.shape != (len(JOINTS),):
            raise ValueError(f"a twin action is {len(JOINTS)} joint targets {list(JOINTS)}, got shape {action.shape}")
        watch = self.mid_episode
        if watch is not None and watch.pending:  # the changes that fire at the scene the policy just acted on
            for i in watch.observe(self.steps, self.scene()):
                apply_change(self.twin, self.perturbation.during[i])
        self.twin.set_joint_targets(dict(zip(JOINTS, action)))
        self.twin.advance(self.twin.control_period)
        self.steps += 1
        success = self.twin.success()
        return self._observation(), success, success or self.steps >= self.max_steps

    def _observation(self) -> Observation:
        """The step's observation; with perception, its frames (rendered whether or not the observation keeps them)
        go through the fiducial perception first."""
        p = self.perception
        frames = {cam: self.twin.render(cam) for cam in self.twin.cameras} if self.render_images or p else {}
        joints = self.twin.joint_positions()
        if p is not None:
            p.update(self.steps * self.control_period_s, frames, {c: self.twin.render_depth(c) for c in p.depth},
                     joints)
        images = frames if self.render_images else {}
        raw = {"agent_pos": np.array([joints[j] for j in JOINTS]), "pixels": images}
        return Observation({}, images, raw, self.task)

    def scene(self) -> SceneState:
        """The simulator's scene, or with perception the scene as perceived (objects from their markers, the gripper
        by forward kinematics)."""
        return self.twin.scene() if self.perception is None else self.perception.scene(self.twin.task)

    def ground_truth(self, views: Sequence[str] | None = None, scene: SceneState | None = None) -> dict[str, ViewGraph]:
        """Graphs of `scene` (the simulator's truth without one) by the projection and relation rules."""
        return self.twin.ground_truth(views, scene)

    def robot_state(self) -> RobotState:
        """The six joints (radians, URDF names) as the arm's joint_states report them; no end effector pose."""
        positions = self.twin.joint_positions()
        velocities = self.twin.joint_velocities()
        return RobotState(tuple(JOINTS), np.array([positions[j] for j in JOINTS]),
                          np.array([velocities[j] for j in JOINTS]))

    def camera_intrinsics(self) -> dict[str, np.ndarray]:
        config = self.twin.config
        return {cam: self.twin.intrinsics(cam, config.image_width, config.image_height) for cam in self.twin.cameras}

    @property
    def control_period_s(self) -> float:
        return float(self.twin.control_period)

    settle_steps = 0  # a reset settles the scene before the first observation, off the clock

    def record_facts(self) -> dict[str, Any]:
        facts = {"perturbation_applied": self.perturbation.describe()}
        return {**facts, TRIGGERS_KEY: self.perturbation.triggers} if self.perturbation.during else facts

    def episode_info(self) -> dict[str, Any]:
        config = self.twin.config
        info = {"goal": (TARGET, self.twin.layout.place), "table_center": np.array([*config.table_center_xy, 0.0])}
        return {**info, TRIGGERS_KEY: self.perturbation.triggers} if self.perturbation.during else info

    def pick_place(self, target: str, place: str) -> TwinPickPlace:
        return TwinPickPlace(self.twin.model, self.twin.config, target, place)

    def close(self) -> None:
        self.twin.close()
