"""Scripted pick-and-place of a bowl for the SO101 twin, in joint position targets.

The gripper pinches the bowl's rim: the wall at the side of the bowl that faces across the arm's
reach, jaws closing along the bowl's radius and pointing straight down. Every control step the
phase's Cartesian goal is approached at a bounded speed and turned into joint targets by the
damped least-squares IK of ``lerobot_env_so101.ik_control`` (solved on a private ``MjData``, with
the approach-axis constraint and the wrist roll seeded toward the jaw direction). While the bowl
is carried the goal is shifted by the bowl's remaining error, so a bowl that slipped in the jaws
still lands centred. Phases: hover, descend, close, lift, traverse, lower, open, retreat.

It reads nothing but the privileged scene (object positions, the gripper frame's pose) and its own commands (the
first IK seed is the rest pose the reset commanded), with a model of the twin for the IK, so it acts the same in
process (the backend's model) and in the ROS policy node (a model of its own, from the scene topic): the arm's
kinematics are the same in every task's model.
"""

from __future__ import annotations

import enum
import importlib.util
from dataclasses import dataclass
from functools import cache
from types import ModuleType

import mujoco
import numpy as np

from sgvla.so101.hardware.joints import JOINTS
from sgvla.core.state import SceneState
from sgvla.so101.twin.config import BOWLS, TwinConfig, load_twin_config
from sgvla.so101.twin.scene import JAW_PADS, build_spec, object_height
from sgvla.so101.twin.twin import GRIPPER_SITE
from sgvla.so101.urdf import source_dir

ARM = JOINTS[:5]
APPROACH_AXIS, JAW_AXIS = 0, 2  # gripperframe axes: x points out of the fingers, the jaws close along z
GRASP_JAW_ANGLE = 0.46  # rad: the pads are parallel here (package MJCF)


@cache
def ik_control() -> ModuleType:
    """lerobot_env_so101's ``ik_control`` (MuJoCo and numpy only), run from its file: its package's ``__init__``
    imports LeRobot's env config (torch, transformers: seconds and ~0.7 GiB resident), which neither a simulator worker
    stepping the twin nor a node that reads only PickPlaceParams uses. The package's own import, when something makes
    it (LeRobot's plugin discovery), is left as it is: this module object is sgvla's alone."""
    path = source_dir() / "ik_control.py"
    spec = importlib.util.spec_from_file_location("sgvla.so101.twin._lerobot_env_so101_ik_control", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"{path} is missing: lerobot_env_so101's IK, which the twin's pick-and-place uses")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Phase(enum.Enum):
    HOVER = enum.auto()
    DESCEND = enum.auto()
    CLOSE = enum.auto()
    LIFT = enum.auto()
    TRAVERSE = enum.auto()
    LOWER = enum.auto()
    OPEN = enum.auto()
    RETREAT = enum.auto()
    DONE = enum.auto()


_NEXT = dict(zip(list(Phase)[:-1], list(Phase)[1:]))
_CLOSED_PHASES = (Phase.CLOSE, Phase.LIFT, Phase.TRAVERSE, Phase.LOWER)
_SLOW_PHASES = (Phase.DESCEND, Phase.LIFT, Phase.LOWER)


@dataclass(frozen=True)
class PickPlaceParams:
    speed: float = 0.25  # m/s of the IK goal in free space
    slow_speed: float = 0.1  # m/s next to objects
    hover: float = 0.05  # m above the rim before descending
    grip_depth: float = 0.012  # m of wall between the pads' centre and the rim top
    wall_to_fixed_pad: float = 0.5  # where the wall sits between the jaws' midpoint (0) and the fixed pad (1)
    carry_height: float = 0.19  # m: the grasp point's height while carrying
    release_clearance: float = 0.008  # m between the bowl's underside and the place top at release
    retreat: float = 0.06  # m straight up after releasing
    tolerance: float = 0.006  # m: a moving phase ends when the grasp point is this close to its goal
    open_angle: float = 1.0  # rad of the gripper joint when open
    closed_angle: float = -0.17  # rad: closed past the wall, so the servo squeezes at its force limit
    close_s: float = 0.6  # seconds to close / open the jaws
    phase_timeout_s: float = 4.0  # a moving phase that cannot reach its goal gives up after this long
    sag_gain: float = 0.15  # per step: integral correction of the servos' steady-state error (gravity sag)
    max_sag: float = 0.04  # m: bound of that correction

    @property
    def closed_below(self) -> float:
        """The gripper angle (rad) below which the jaws count as closed, for perception's carried objects: the middle
        of the open and closed angles."""
        return (self.open_angle + self.closed_angle) / 2


def _grasp_offset(model: mujoco.MjModel, site: int, wall_to_fixed_pad: float) -> np.ndarray:
    """The point that goes on the wall, in the gripperframe: between the jaws' midpoint (at the grasp
    angle) and the fixed pad, so that closing barely pushes the bowl."""
    data = mujoco.MjData(model)
    data.qpos[model.joint("gripper").qposadr[0]] = GRASP_JAW_ANGLE
    mujoco.mj_forward(model, data)
    fixed, moving = (data.geom_xpos[model.geom(name).id] for name in JAW_PADS)
    point = (fixed + moving) / 2 + wall_to_fixed_pad * (fixed - (fixed + moving) / 2)
    return data.site_xmat[site].reshape(3, 3).T @ (point - data.site_xpos[site])


class TwinPickPlace:
    """Moves ``target_object`` (a bowl: the one the policy chose, which may be the wrong one) onto ``place_object``;
    ``act(scene)`` returns 6 joint targets (JOINTS order)."""

    def __init__(self, model: mujoco.MjModel, config: TwinConfig, target_object: str, place_object: str,
                 params: PickPlaceParams = PickPlaceParams()) -> None:
        if target_object not in BOWLS:
            raise ValueError(f"the twin's pick-and-place grasps a bowl's rim; cannot pick {target_object!r} "
                             f"(bowls: {list(BOWLS)})")
        if place_object not in config.shapes:
            raise ValueError(f"unknown place object {place_object!r}; choose from {sorted(config.shapes)}")
        self.model, self.config = model, config
        self.target_object = target_object
        self.place_object = place_object
        self.params = params
        self._ik_control = ik_control()
        self._ik = mujoco.MjData(model)
        self._site = model.site(GRIPPER_SITE).id
        self._dofs = np.array([model.joint(j).dofadr[0] for j in ARM])
        self._roll = model.joint("wrist_roll").id
        self._offset = _grasp_offset(model, self._site, params.wall_to_fixed_pad)
        self._steps_per_s = config.control_rate_hz
        self.phase = Phase.HOVER
        self._steps = 0
        self._goal: np.ndarray | None = None  # where the IK is sent this step
        self._q: np.ndarray | None = None  # last arm solution
        self._jaw_dir: np.ndarray | None = None
        self._grasp: np.ndarray | None = None
        self._entry: np.ndarray | None = None  # the grasp point when the current phase began
        self._sag = np.zeros(3)  # what the IK goal is shifted by so the grasp point, not the command, arrives
        self._known: dict[str, np.ndarray] = {}  # target and place where the scene last had them

    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE

    def _point(self, scene: SceneState) -> np.ndarray:
        """The grasp point, from the gripper frame's pose in the scene (as ``control_point`` computes it)."""
        return scene.eef_pos + scene.eef_mat @ self._offset

    def _plan_grasp(self, bowl: np.ndarray) -> None:
        """The rim point across the arm's reach (the side nearer the arm's centre line), jaws along the radius."""
        reach = bowl[:2] / max(np.linalg.norm(bowl[:2]), 1e-9)
        side = np.array([-reach[1], reach[0]])
        if side[1] * bowl[1] > 0:
            side = -side
        shape = self.config.bowl
        self._jaw_dir = np.array([*side, 0.0])
        self._grasp = bowl + np.array([*(side * (shape.radius - shape.wall / 2)),
                                       shape.height - self.params.grip_depth])

    def _where(self, scene: SceneState, name: str) -> np.ndarray:
        """Where `name` is: the scene's position, or where the scene last had it. A perceived scene loses an object
        whose markers stay hidden past the tracker's age (the stove under a carried bowl); it has not moved since."""
        if name in scene.objects:
            self._known[name] = scene.position(name)
        return self._known[name]

    def _phase_goal(self, scene: SceneState, point: np.ndarray) -> np.ndarray:
        p = self.params
        bowl = self._where(scene, self.target_object)
        if self.phase is Phase.HOVER:
            return self._grasp + [0.0, 0.0, p.hover]
        if self.phase is Phase.DESCEND:
            return self._grasp
        if self.phase is Phase.LIFT:
            return np.array([*self._entry[:2], p.carry_height])
        place = self._where(scene, self.place_object)
        goal = np.array([place[0], place[1], place[2] + object_height(self.config, self.place_object)
                         + p.release_clearance])
        carried = point + goal - bowl  # the grasp point that puts the bowl at the goal
        if self.phase is Phase.TRAVERSE:
            return np.array([carried[0], carried[1], p.carry_height])
        if self.phase is Phase.LOWER:
            return carried
        if self.phase is Phase.RETREAT:
            return self._entry + [0.0, 0.0, p.retreat]
        raise ValueError(f"{self.phase} has no position goal")

    def _advance(self, scene: SceneState, point: np.ndarray) -> np.ndarray | None:
        """Move through finished phases; returns the current phase's goal (None for the jaw phases)."""
        p = self.params
        while not self.done:
            if self.phase in (Phase.CLOSE, Phase.OPEN):
                if self._steps < p.close_s * self._steps_per_s:
                    return None
            else:
                goal = self._phase_goal(scene, point)
                near = np.linalg.norm(goal - point) < p.tolerance
                if not near and self._steps < p.phase_timeout_s * self._steps_per_s:
                    return goal
            self.phase = _NEXT[self.phase]
            self._steps = 0
            self._entry = point
        return None

    def _solve(self, goal: np.ndarray) -> np.ndarray:
        data = self._ik
        data.qpos[self._dofs] = self._q  # the arm's joints come first in the twin's model (qpos = dof addresses)
        mujoco.mj_kinematics(self.model, data)
        seed = self._q.copy()
        roll_index = ARM.index("wrist_roll")
        seed[roll_index] += self._ik_control.roll_to_align_axis(data, self._site, self._roll, JAW_AXIS, self._jaw_dir)
        seed[roll_index] = np.clip(seed[roll_index], *self.model.jnt_range[self._roll])
        return self._ik_control.solve_ik(self.model, data, self._site, self._dofs, goal, seed_q=seed,
                                         point_offset=self._offset, approach_axis=APPROACH_AXIS,
                                         approach_dir=self._ik_control.DOWN)

    def act(self, scene: SceneState) -> np.ndarray:
        point = self._point(scene)
        if self._q is None:
            missing = [n for n in (self.target_object, self.place_object) if n not in scene.objects]
            if missing:
                raise ValueError(f"{missing} not in the scene; it has {list(scene.objects)}")
            self._plan_grasp(self._where(scene, self.target_object))
            self._where(scene, self.place_object)
            self._q = np.array([self.config.rest_pose.get(j, 0.0) for j in ARM])
            self._goal = point
        goal = self._advance(scene, point)
        if goal is not None:
            speed = self.params.slow_speed if self.phase in _SLOW_PHASES else self.params.speed
            step = goal - self._goal
            limit = speed / self._steps_per_s
            self._goal = self._goal + step * min(1.0, limit / max(np.linalg.norm(step), 1e-12))
            self._sag = np.clip(self._sag + self.params.sag_gain * (self._goal - point), -self.params.max_sag,
                                self.params.max_sag)
            self._q = self._solve(self._goal + self._sag)
        self._steps += 1
        gripper = self.params.closed_angle if self.phase in _CLOSED_PHASES else self.params.open_angle
        return np.array([*self._q, gripper])


def controller_factory(config: TwinConfig | None = None):
    """``(target, place) -> TwinPickPlace`` on a model of the twin of its own (built on first use): what a policy
    node drives the twin with from the scene topic."""
    config = config or load_twin_config()
    model: list[mujoco.MjModel] = []

    def make(target_object: str, place_object: str) -> TwinPickPlace:
        if not model:
            model.append(build_spec(config).compile())
        return TwinPickPlace(model[0], config, target_object, place_object)

    return make
