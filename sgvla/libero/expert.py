"""Scripted privileged expert: pick a bowl by its wall and put it on the plate.

:class:`PickPlaceController` drives LIBERO's OSC_POSE controller (relative
actions: 5 cm and 0.5 rad per unit, gripper -1 open / +1 close) through
end-effector waypoints computed from simulator state, so it knows nothing about
prompts: callers choose ``target_object``. :class:`ScriptedExpert` (built by
:func:`task_expert`) is the privileged policy that takes the target from the
task's goal, ``(On bowl plate)``; a prompt-grounded policy can reuse the
controller with a bowl it resolved itself.

Phases: approach above the grasp point, descend, grip, lift to a height where
the bowl clears every other object, carry the bowl (wherever it hangs in the
gripper) over the plate, lower until it nearly touches the plate, release,
retreat. A waypoint ends when reached, when the
gripper stalls, or after ``segment_steps``; an integral term removes the OSC's
steady-state offset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sgvla.libero.bddl import BddlProblem
from sgvla.core.state import SceneState

OPEN, CLOSE = -1.0, 1.0
POS_SCALE, ROT_SCALE = 0.05, 0.5  # OSC_POSE output_max of LIBERO's controller config


@dataclass(frozen=True)
class PickPlaceParams:
    """Distances in metres; ``*_steps`` in env steps (20 Hz)."""

    finger_reach: float = 0.045  # outer finger beyond the grasped wall, for the clearance test
    enough_room: float = 0.02  # clearance that makes a grasp direction acceptable
    grasp_depth: float = 0.025  # grip point below the rim top
    hover: float = 0.08  # above the grasp point before descending
    clearance: float = 0.06  # bowl bottom above the highest other object while carrying
    release_gap: float = 0.012  # bowl bottom above the plate top when releasing
    tolerance: float = 0.006  # waypoint reached
    gain: float = 1.5
    integral_gain: float = 0.15  # removes the OSC's steady-state offset
    grip_steps: int = 12
    release_steps: int = 8
    stall_steps: int = 6  # a waypoint is given up when the gripper moved < 1 mm over this many steps
    segment_steps: int = 60
    lifted: float = 0.02  # the bowl must rise this much while lifting, else the grasp is retried
    grasp_attempts: int = 3  # grasp directions tried, best first


@dataclass(frozen=True)
class _Extent:
    center: np.ndarray  # body position
    lower: np.ndarray  # world AABB of the geoms
    upper: np.ndarray
    wall: float  # horizontal distance of the farthest geom center from the body: a bowl's upper wall

    @property
    def top(self) -> float:
        return float(self.upper[2])

    @property
    def bottom(self) -> float:
        return float(self.lower[2])


def _extent(scene: SceneState, name: str) -> _Extent:
    mask = scene.geoms.geom_object == scene.objects.index(name)
    centers, rotations = scene.geoms.centers[0][mask], scene.geoms.rotations[0][mask]
    reach = (np.abs(rotations) @ scene.geoms.half_sizes[mask][:, :, None])[:, :, 0]  # world half extents
    body = scene.position(name)
    wall = float(np.linalg.norm(centers[:, :2] - body[:2], axis=1).max())
    return _Extent(body, (centers - reach).min(0), (centers + reach).max(0), wall)


def _rotation_error(desired: np.ndarray, current: np.ndarray) -> np.ndarray:
    """World-frame axis-angle taking ``current`` to ``desired``."""
    R = desired @ current.T
    angle = np.arccos(np.clip((np.trace(R) - 1) / 2, -1.0, 1.0))
    if angle < 1e-6:
        return np.zeros(3)
    axis = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]]) / (2 * np.sin(angle))
    return axis * angle


def _yaw(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


class PickPlaceController:
    """Waypoint controller: ``act(scene)`` returns the next 7-D action until :attr:`done`.

    The grasp pinches the bowl wall at ``center + wall * d`` for one of eight
    horizontal directions ``d``, with the fingers closing along ``d`` (at LIBERO's
    initial orientation they close along world y, so ``d = +-y`` needs no turn).
    Directions are tried in order of preference: the least turn among those
    where the outer finger has ``enough_room`` to every other colliding geom,
    then by room. A grasp that does not lift the bowl is retried with the next.
    """

    PHASES = ("approach", "descend", "grip", "lift", "carry", "lower", "release", "retreat", "done")
    _TIMED = {"grip": "grip_steps", "release": "release_steps"}

    def __init__(self, target_object: str, place_object: str, params: PickPlaceParams = PickPlaceParams()) -> None:
        self.target_object = target_object
        self.place_object = place_object
        self.params = params
        self.reset()

    def reset(self) -> None:
        self.phase = "approach"
        self._steps = 0
        self._integral = np.zeros(3)
        self._trail: list[np.ndarray] = []
        self._orientation: np.ndarray | None = None
        self._initial = np.eye(3)  # gripper orientation at the start
        self._candidates: list[tuple[float, np.ndarray]] = []  # (turn, direction), best first
        self._direction = np.array([0.0, 1.0, 0.0])
        self._rest_bottom = 0.0  # bowl bottom before the grasp
        self._carry_z = 0.0

    @property
    def done(self) -> bool:
        return self.phase == "done"

    def _advance(self, scene: SceneState) -> None:
        lifting = self.phase == "lift"
        self.phase = self.PHASES[self.PHASES.index(self.phase) + 1]
        if lifting and _extent(scene, self.target_object).bottom < self._rest_bottom + self.params.lifted \
                and self._candidates:
            self._next_grasp()  # nothing in the gripper: try the next direction from above
            self.phase = "approach"
        self._steps = 0
        self._integral[:] = 0.0
        self._trail.clear()
        if self.phase == "lift":
            bowl = _extent(scene, self.target_object)
            others = max(_extent(scene, n).top for n in scene.objects if n != self.target_object)
            hang = scene.eef_pos[2] - bowl.bottom
            self._carry_z = max(others + self.params.clearance + hang, scene.eef_pos[2])

    def _plan_grasp(self, scene: SceneState) -> None:
        """Rank the eight grasp directions (see the class docstring)."""
        p = self.params
        bowl = _extent(scene, self.target_object)
        grip_z = bowl.top - p.grasp_depth
        boxes = scene.obstacles
        box_top = boxes.centers[:, 2] + (np.abs(boxes.rotations) @ boxes.half_sizes[:, :, None])[:, 2, 0]
        keep = (boxes.owner != scene.objects.index(self.target_object)) & (box_top > grip_z)
        options = []
        for angle in np.arange(8) * np.pi / 4:
            d = np.array([np.cos(angle), np.sin(angle), 0.0])
            finger = np.array([bowl.center + d * (bowl.wall + r) + [0.0, 0.0, grip_z - bowl.center[2] + dz]
                               for r in (0.015, 0.03, p.finger_reach) for dz in (0.0, 0.03, 0.06, 0.1)])
            turn = (angle - np.pi / 2 + np.pi / 2) % np.pi - np.pi / 2  # fingers along d; +-180 deg is the same grasp
            room = boxes.distance(finger, keep)
            options.append(((room < p.enough_room, abs(turn) if room >= p.enough_room else -room), turn, d))
        options.sort(key=lambda o: o[0])
        self._initial = scene.eef_mat.copy()
        self._rest_bottom = bowl.bottom
        self._candidates = [(turn, d) for _, turn, d in options[: p.grasp_attempts]]
        self._next_grasp()

    def _next_grasp(self) -> None:
        turn, self._direction = self._candidates.pop(0)
        self._orientation = _yaw(turn) @ self._initial

    def _target(self, scene: SceneState) -> tuple[np.ndarray, float]:
        """Gripper waypoint and gripper command of the current phase."""
        p = self.params
        if self.phase in ("approach", "descend"):
            bowl = _extent(scene, self.target_object)
            grasp = np.r_[bowl.center[:2] + self._direction[:2] * bowl.wall, bowl.top - p.grasp_depth]
            return (grasp + [0.0, 0.0, p.hover] if self.phase == "approach" else grasp), OPEN
        if self.phase in ("grip", "release"):
            return scene.eef_pos, CLOSE if self.phase == "grip" else OPEN
        if self.phase == "lift":
            return np.r_[scene.eef_pos[:2], self._carry_z], CLOSE
        bowl, plate = _extent(scene, self.target_object), _extent(scene, self.place_object)
        above_plate = plate.center[:2] - (bowl.center[:2] - scene.eef_pos[:2])  # the bowl hangs where it hangs now
        if self.phase == "carry":
            return np.r_[above_plate, self._carry_z], CLOSE
        if self.phase == "lower":
            return np.r_[above_plate, plate.top + p.release_gap + scene.eef_pos[2] - bowl.bottom], CLOSE
        return np.r_[scene.eef_pos[:2], self._carry_z], OPEN  # retreat, done

    def _finished(self, error: np.ndarray, scene: SceneState) -> bool:
        p = self.params
        if self.phase in self._TIMED:
            return self._steps >= getattr(p, self._TIMED[self.phase])
        if self.phase == "done":
            return False
        stalled = len(self._trail) > p.stall_steps and np.linalg.norm(scene.eef_pos - self._trail[-p.stall_steps - 1]) < 1e-3
        return np.linalg.norm(error) < p.tolerance or stalled or self._steps >= p.segment_steps

    def act(self, scene: SceneState) -> np.ndarray:
        p = self.params
        if self._orientation is None:
            self._plan_grasp(scene)
        target, gripper = self._target(scene)
        while self._finished(target - scene.eef_pos, scene):
            self._advance(scene)
            target, gripper = self._target(scene)
        error = target - scene.eef_pos
        self._steps += 1
        self._trail.append(scene.eef_pos.copy())
        self._integral = np.clip(self._integral + error, -0.1, 0.1)
        action = np.zeros(7)
        action[:3] = np.clip((p.gain * error + p.integral_gain * self._integral) / POS_SCALE, -1.0, 1.0)
        action[3:6] = np.clip(_rotation_error(self._orientation, scene.eef_mat) / ROT_SCALE, -1.0, 1.0)
        action[6] = gripper
        return action


class ScriptedExpert:
    """Privileged policy: the goal ``(On <target> <place>)`` of the task file picks the objects."""

    def __init__(self, target_object: str, place_object: str, params: PickPlaceParams = PickPlaceParams()) -> None:
        self.controller = PickPlaceController(target_object, place_object, params)

    def reset(self) -> None:
        self.controller.reset()

    def act(self, scene: SceneState) -> np.ndarray:
        return self.controller.act(scene)


def task_expert(problem: BddlProblem, params: PickPlaceParams = PickPlaceParams()) -> ScriptedExpert:
    """The expert of a task file whose goal places one object on another."""
    if len(problem.goal_placements) != 1:
        raise ValueError(f"{problem.path}: the expert needs exactly one (On a b) goal, got {problem.goal_placements}")
    return ScriptedExpert(*problem.goal_placements[0], params)
