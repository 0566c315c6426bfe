"""Task-conditioned scene perturbations (paper, section 5.2 and Table 7), as data.

A perturbation set is one YAML file in ``config/perturbations/`` (or any path)::

    name: table7
    description: ...
    subject_filter: akita_black_bowl_1   # graph injected into prompts: this subject only; null = full graph
    referring: spatial                   # every task's instruction: a spatially-referring program, per episode
    tasks:
      4:
        remove: [cookies_1, glazed_rim_porcelain_ramekin_1]   # stripped from the task file before the scene is built
      0:
        prompt: pick up the black bowl in front of the ramekin and place it on the plate
      2:
        cameras: [frontview, robot0_robotview]                  # replace agentview / robot0_eye_in_hand
      5:
        poses:                                                  # applied in order after the initial state,
          - swap: [cookies_1, glazed_rim_porcelain_ramekin_1]   # each followed by settle_steps physics steps
          - move: {object: plate_1, by: [-0.05, -0.45, 0.5], jitter: [0, 0, 0]}
        settle_steps: 200
      6:
        during:                                                 # mid-episode changes (sgvla.core.mid_episode)
          - when: reached                                       # a goal stage (reached, grasped, ...) or {step: N}
            poses: [{swap: [akita_black_bowl_1, akita_black_bowl_2]}]
            remove: [cookies_1]                                 # taken off the table (parked off camera)

Files are checked when loaded, against the task files of LIBERO-Spatial, so a
bad entry fails with the file, task and key named: unknown objects, removing a
goal object, a support of one or an object others stand on, a prompt that no
longer names the goal objects, unknown cameras, moving a fixture. Pose
operations are checked again on the scene they produce (:func:`check_scene`):
goal objects must stay on the table and the goal must not be satisfied already.
``jitter`` adds a uniform offset in ``[-jitter, +jitter]`` drawn from the reset
seed, so a seed always gives the same scene.

A mid-episode change (``during``) is applied by the backend that owns the simulator when its trigger fires
(:meth:`sgvla.libero.env.LiberoBackend.step`), with the robot held while the moved objects settle. A swap of the two
bowls keeps each bowl's identity: the goal (the task file's target bowl, what success reads) stays the same bowl,
which now stands where its look-alike stood, and the look-alike where it stood. The instruction's words ("the black
bowl between the plate and the ramekin") now describe the look-alike, so only a live scene graph (whose target node
is the goal bowl) says where the target went; a graph frozen at the first step describes the old place.
A removed distractor is parked off the table, out of every camera (MuJoCo cannot drop a body from a built model).

``referring`` (a vocabulary of ``config/referring/``; sgvla.core.referring) replaces every task's instruction, at
each reset, by a program that picks out the task's target bowl alone in the scene the reset made, worded from the
vocabulary (``spatial_referring.yaml``); the record carries its family and program. A task of such a set keeps no
``prompt`` of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from sgvla.core.mid_episode import Trigger, change_list, change_trigger, triggers_text
from sgvla.core.perturbation_files import Fail, PerturbationError, check_task_keys, parse_set, read_set
from sgvla.core.referring import ReferringSpec, parse_referring
from sgvla.libero.bddl import BddlProblem
from sgvla.libero.cameras import CAMERAS
from sgvla.paths import CONFIG_DIR
from sgvla.sim.mujoco_state import JointSlice, ObjectIndex, free_joint, object_positions

PERTURBATION_DIR = CONFIG_DIR / "perturbations"
# Cameras of LIBERO's table-top scenes: the arena's and the Panda's.
DEFAULT_SETTLE_STEPS = 200  # physics steps after each pose operation, as in the reference
ROBOT_JOINT_PREFIXES = ("robot0_", "gripper0_")

_SET_KEYS = {"name", "description", "subject_filter", "referring", "tasks"}
ONTOLOGY = "libero_spatial"  # the nouns a referring vocabulary gives LIBERO-Spatial's objects
_TASK_KEYS = {"remove", "prompt", "cameras", "poses", "settle_steps", "during"}
PARKED_AT = np.array([0.0, 3.0, 0.5])  # world position (beside the arena, out of every camera) of removed objects


@dataclass(frozen=True)
class Swap:
    """Exchange the full poses (position and orientation) of two movable objects."""

    a: str
    b: str


@dataclass(frozen=True)
class Move:
    """Shift a movable object by ``by`` metres (world frame), plus a seeded uniform ``jitter``."""

    object: str
    by: tuple[float, float, float]
    jitter: tuple[float, float, float] = (0.0, 0.0, 0.0)


PoseOp = Swap | Move


def _describe_ops(ops: Sequence[PoseOp]) -> list[str]:
    return [f"swap {op.a}<->{op.b}" if isinstance(op, Swap) else f"move {op.object} by {list(op.by)}" for op in ops]


@dataclass(frozen=True)
class MidEpisodeChange:
    """Pose operations and removals applied during an episode, when ``when`` fires (sgvla.core.mid_episode)."""

    when: Trigger
    poses: tuple[PoseOp, ...] = ()
    remove: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = _describe_ops(self.poses) + ([f"remove {','.join(self.remove)}"] if self.remove else [])
        return f"at {self.when}: {', '.join(parts)}"


@dataclass(frozen=True)
class TaskPerturbation:
    remove: tuple[str, ...] = ()
    prompt: str | None = None
    cameras: tuple[str, str] | None = None
    poses: tuple[PoseOp, ...] = ()
    settle_steps: int = DEFAULT_SETTLE_STEPS
    during: tuple[MidEpisodeChange, ...] = ()

    @property
    def triggers(self) -> str:
        """The mid-episode triggers as episode facts carry them ("" : none)."""
        return triggers_text([c.when for c in self.during])

    def describe(self) -> str:
        """A one-line summary for the episode record."""
        parts = [f"remove {','.join(self.remove)}"] if self.remove else []
        parts += [f"prompt '{self.prompt}'"] if self.prompt else []
        parts += [f"cameras {','.join(self.cameras)}"] if self.cameras else []
        parts += _describe_ops(self.poses)
        parts += [c.describe() for c in self.during]
        return "; ".join(parts) or "none"


@dataclass(frozen=True, eq=False)
class PerturbationSet:
    name: str
    description: str = ""
    subject_filter: str | None = None
    tasks: Mapping[int, TaskPerturbation] = field(default_factory=dict)
    source: str = "<code>"
    referring: ReferringSpec | None = None  # every instruction a spatially-referring program (module docstring)

    def for_task(self, task_id: int) -> TaskPerturbation:
        return self.tasks.get(task_id, TaskPerturbation())


def available_perturbations() -> list[str]:
    return sorted(p.stem for p in PERTURBATION_DIR.glob("*.yaml"))


def load_perturbations(name_or_path: str | Path) -> PerturbationSet:
    """``config/perturbations/<name>.yaml`` or an explicit YAML path, validated against LIBERO-Spatial."""
    from sgvla.libero.tasks import num_tasks, task_info

    data, path = read_set(name_or_path, PERTURBATION_DIR, available_perturbations())
    problems = {i: task_info(i).problem for i in range(num_tasks())}
    return parse_perturbations(data, problems, source=str(path), default_name=path.stem)


def parse_perturbations(data: Any, problems: Mapping[int, BddlProblem], source: str = "<data>",
                        default_name: str = "perturbations") -> PerturbationSet:
    """Build and validate a set from parsed YAML; ``problems`` maps task ids to their task files."""
    checked = parse_set(data, _SET_KEYS, problems, source)
    subject = checked.data.get("subject_filter")
    if subject is not None:
        missing = [t for t, p in problems.items() if subject not in p.entities]
        if not isinstance(subject, str) or missing:
            raise checked.fail("key 'subject_filter'", f"{subject!r} is not an object of task(s) {missing}")
    tasks = {t: _parse_task(entry, problems[t], checked.task_fail(t)) for t, entry in checked.tasks.items()}
    referring = parse_referring(checked.data.get("referring"), ONTOLOGY, checked.fail)
    prompted = sorted(t for t, p in tasks.items() if p.prompt is not None)
    if referring is not None and prompted:
        raise checked.fail("key 'referring'", f"replaces every task's instruction; task(s) {prompted} give a prompt")
    return PerturbationSet(checked.name(default_name), checked.description, subject, tasks, source, referring)


def _parse_task(entry: Any, problem: BddlProblem, fail: Fail) -> TaskPerturbation:
    check_task_keys(entry, _TASK_KEYS, fail)
    remove = _names(entry.get("remove", []), "remove", fail)
    removed = set(remove)
    for name in remove:
        if name in problem.fixtures:
            raise fail("remove", f"{name!r} is a fixture; only movable objects can be removed")
        if name not in problem.objects:
            raise fail("remove", f"unknown object {name!r}; this task has {sorted(problem.objects)}")
        if name in problem.goal_objects:
            raise fail("remove", f"{name!r} is a goal object")
        supported = [g for g in problem.goal_objects if name in problem.supports(g)]
        if supported:
            raise fail("remove", f"{name!r} supports goal object(s) {supported} in the initial scene")
        standing = [d for d in problem.dependents(name) if d not in removed]
        if standing:
            raise fail("remove", f"{standing} stand on {name!r} in the initial scene")

    prompt = entry.get("prompt")
    if prompt is not None:
        if not isinstance(prompt, str) or not prompt.strip():
            raise fail("prompt", "must be a non-empty string")
        for goal in problem.goal_objects:
            noun = problem.objects.get(goal, problem.fixtures.get(goal, goal)).split("_")[-1]
            if noun not in prompt.lower():
                raise fail("prompt", f"does not mention goal object {goal!r} ({noun!r}); the goal itself cannot change")

    cameras = entry.get("cameras")
    if cameras is not None:
        if not isinstance(cameras, list) or len(cameras) != 2 or len(set(cameras)) != 2:
            raise fail("cameras", "must list two different cameras: [main, wrist-slot]")
        for cam in cameras:
            if cam not in CAMERAS:
                raise fail("cameras", f"unknown camera {cam!r}; choose from {list(CAMERAS)}")

    movable = set(problem.objects) - removed
    poses = tuple(_parse_op(op, movable, fail) for op in entry.get("poses") or [])
    settle = entry.get("settle_steps", DEFAULT_SETTLE_STEPS)
    if not isinstance(settle, int) or settle < 0:
        raise fail("settle_steps", "must be a non-negative integer")
    during = change_list(entry, fail)
    changes = tuple(_parse_change(c, problem, movable, fail) for c in during)
    return TaskPerturbation(tuple(remove), prompt, tuple(cameras) if cameras else None, poses, settle,  # type: ignore[arg-type]
                            changes)


def _parse_change(change: Any, problem: BddlProblem, movable: set[str], fail: Fail) -> MidEpisodeChange:
    """One mid-episode change: its trigger, pose operations on movable objects, removals of non-goal objects."""
    when = change_trigger(change, fail)
    poses = tuple(_parse_op(op, movable, lambda _, msg: fail("during", msg)) for op in change.get("poses") or [])
    remove = tuple(_names(change.get("remove", []), "during", fail))
    for name in remove:
        if name not in movable:
            raise fail("during", f"cannot remove {name!r}: not a movable object of this scene; movable: {sorted(movable)}")
        if name in problem.goal_objects:
            raise fail("during", f"cannot remove {name!r}: it is a goal object")
    if not poses and not remove:
        raise fail("during", f"the change at {when} changes nothing: give 'poses' and/or 'remove'")
    return MidEpisodeChange(when, poses, remove)


def _names(value: Any, key: str, fail: Fail) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(key, "must be a list of object names")
    return value


def _vector(value: Any, key: str, fail: Fail) -> tuple[float, float, float]:
    if not isinstance(value, list) or len(value) != 3 or not all(isinstance(v, int | float) for v in value):
        raise fail(key, f"must be three numbers [x, y, z], got {value!r}")
    return tuple(float(v) for v in value)  # type: ignore[return-value]


def _parse_op(op: Any, movable: set[str], fail: Fail) -> PoseOp:
    def check(name: Any) -> str:
        if name not in movable:
            raise fail("poses", f"{name!r} is not a movable object of this scene; movable: {sorted(movable)}")
        return name

    if isinstance(op, dict) and set(op) == {"swap"}:
        pair = _names(op["swap"], "poses", fail)
        if len(pair) != 2 or pair[0] == pair[1]:
            raise fail("poses", f"swap needs two different objects, got {pair}")
        return Swap(check(pair[0]), check(pair[1]))
    if isinstance(op, dict) and set(op) == {"move"} and isinstance(op["move"], dict):
        move = op["move"]
        extra = sorted(set(move) - {"object", "by", "jitter"})
        if extra or "object" not in move or "by" not in move:
            raise fail("poses", f"move needs 'object' and 'by' (optional 'jitter'), got keys {sorted(move)}")
        jitter = _vector(move.get("jitter", [0, 0, 0]), "poses", fail)
        if min(jitter) < 0:
            raise fail("poses", f"jitter must be non-negative, got {list(jitter)}")
        return Move(check(move["object"]), _vector(move["by"], "poses", fail), jitter)
    raise fail("poses", f"each operation is {{swap: [a, b]}} or {{move: {{object, by}}}}, got {op!r}")


def _held_joints(model: mujoco.MjModel) -> list[JointSlice]:
    """The robot's and gripper's joints (hinges and slides: one qpos and one dof each)."""
    joints = []
    for j in range(model.njnt):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) or ""
        if name.startswith(ROBOT_JOINT_PREFIXES):
            if model.jnt_type[j] not in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
                raise PerturbationError(f"robot joint {name!r} is not a hinge or slide joint")
            qa, va = int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])
            joints.append(JointSlice(slice(qa, qa + 1), slice(va, va + 1)))
    return joints


def settle_holding_robot(model: mujoco.MjModel, data: mujoco.MjData, steps: int) -> None:
    """Step physics so moved objects come to rest while the robot keeps its configuration."""
    held = _held_joints(model)
    qpos = [data.qpos[j.qpos].copy() for j in held]
    for _ in range(steps):
        for j, q in zip(held, qpos):
            data.qpos[j.qpos] = q
            data.qvel[j.qvel] = 0.0
        mujoco.mj_step(model, data)
    for j, q in zip(held, qpos):
        data.qpos[j.qpos] = q
        data.qvel[j.qvel] = 0.0
    mujoco.mj_forward(model, data)


def apply_poses(model: mujoco.MjModel, data: mujoco.MjData, index: ObjectIndex, task: TaskPerturbation,
                rng: np.random.Generator) -> None:
    """Apply ``task.poses`` in order, settling after each one."""
    apply_ops(model, data, index, task.poses, task.settle_steps, rng)


def apply_change(model: mujoco.MjModel, data: mujoco.MjData, index: ObjectIndex, change: MidEpisodeChange,
                 settle_steps: int, rng: np.random.Generator) -> None:
    """Apply a mid-episode change: its removals (parked off the table, still), then its pose operations."""
    for k, name in enumerate(change.remove):
        j = _joint(model, index, name)
        data.qpos[j.qpos.start: j.qpos.start + 3] = PARKED_AT + [0.3 * k, 0.0, 0.0]
        data.qvel[j.qvel] = 0.0
    mujoco.mj_forward(model, data)
    apply_ops(model, data, index, change.poses, settle_steps, rng)
    if not change.poses:
        settle_holding_robot(model, data, settle_steps)


def _joint(model: mujoco.MjModel, index: ObjectIndex, name: str) -> JointSlice:
    found = free_joint(model, int(index.body_ids[index.column(name)]))
    if found is None:
        raise PerturbationError(f"{name!r} has no free joint and cannot be moved")
    return found


def apply_ops(model: mujoco.MjModel, data: mujoco.MjData, index: ObjectIndex, ops: Sequence[PoseOp],
              settle_steps: int, rng: np.random.Generator) -> None:
    """Apply pose operations in order, settling after each one."""
    def joint(name: str) -> JointSlice:
        return _joint(model, index, name)

    for op in ops:
        if isinstance(op, Swap):
            a, b = joint(op.a), joint(op.b)
            data.qpos[a.qpos], data.qpos[b.qpos] = data.qpos[b.qpos].copy(), data.qpos[a.qpos].copy()
            data.qvel[a.qvel] = data.qvel[b.qvel] = 0.0
        else:
            j = joint(op.object)
            offset = np.asarray(op.by) + rng.uniform(-1.0, 1.0, 3) * np.asarray(op.jitter)
            data.qpos[j.qpos.start: j.qpos.start + 3] += offset
            data.qvel[j.qvel] = 0.0
        mujoco.mj_forward(model, data)
        settle_holding_robot(model, data, settle_steps)


def table_bounds(model: mujoco.MjModel, data: mujoco.MjData, body: str = "table") -> tuple[np.ndarray, np.ndarray]:
    """World-frame (lower, upper) corners of the table's largest box geom."""
    b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
    boxes = [g for g in range(model.ngeom) if model.geom_bodyid[g] == b and model.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX]
    if not boxes:
        raise PerturbationError(f"no box geom on body {body!r}; cannot check that objects stay on the table")
    g = max(boxes, key=lambda g: float(np.prod(model.geom_size[g])))
    center, half = data.geom_xpos[g], model.geom_size[g]
    return center - half, center + half


def check_scene(model: mujoco.MjModel, data: mujoco.MjData, index: ObjectIndex, goal_objects: Sequence[str],
                goal_reached: bool, where: str) -> None:
    """Fail when a perturbed scene can no longer be solved: a goal object off the table, or nothing left to do."""
    lower, upper = table_bounds(model, data)
    positions = object_positions(data, index)
    for name in goal_objects:
        if name not in index.names:
            continue  # a fixture goal (not an object) cannot be moved
        x, y, z = positions[index.column(name)]
        if not (lower[0] <= x <= upper[0] and lower[1] <= y <= upper[1] and z >= upper[2] - 0.02):
            raise PerturbationError(f"{where}: goal object {name!r} left the table (at {np.round([x, y, z], 3).tolist()})")
    if goal_reached:
        raise PerturbationError(f"{where}: the goal already holds after the perturbation")
