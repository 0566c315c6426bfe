"""Task-conditioned perturbations of the SO101 twin's tasks, as data (the twin's counterpart of
:mod:`sgvla.libero.perturbations`).

A set is one YAML file in ``config/perturbations/so101_twin/`` (or any path)::

    name: swapped_bowls
    description: ...
    referring: spatial                                             # every instruction a referring program, per episode
    tasks:
      0:
        prompt: pick up the black bowl and place it on the stove    # replaces the task's prompt
        poses:                                                     # applied in order to the task's layout
          - swap: [black_bowl_1, black_bowl_2]                     # exchange where two objects stand
          - move: {object: red_drawer, by: [0.0, -0.04]}           # shift a table object (what stands on it follows)
        add: {white_plate: [0.33, 0.0]}                            # an object of the twin's set, on the table at x, y
        remove: [cookie]                                           # an object that is no goal and supports nothing
        during:                                                    # mid-episode changes (sgvla.core.mid_episode)
          - when: reached                                          # a goal stage, or {step: N}
            poses: [{swap: [black_bowl_1, black_bowl_2]}]          # applied to the running simulation
            remove: [white_plate]                                  # parked off the table, out of the cameras

Unlike LIBERO's, which act on the simulator's state after its reset, these act on the task's layout before the
scene is built: the twin builds each task's scene from its layout, so a perturbed task is just another layout,
and the seeded position noise of the reset applies to it as to any task. Files are checked when loaded, against
the twin's tasks: unknown keys, tasks and objects, a prompt that no longer names the bowl or the place object,
removing the target, the place object or a support, and the layout each task ends up with (objects apart by
twice the position noise, on the table, the goal not already holding), each error naming the file and the task.

Mid-episode changes (``during``) act on the running simulation instead, applied by the backend when their trigger
fires (`TwinBackend.step`), the arm held while the moved objects settle: a swap exchanges two objects' poses (what
stands on them follows), a move shifts an object (and what stands on it), a removal parks an object off the table.
A bowl swap keeps each bowl's identity (the goal and the success check are the target bowl's, now where its
look-alike stood; the prompt's words now describe the look-alike), as in LIBERO's `mid_episode` set.

``referring`` (a vocabulary of ``config/referring/``; sgvla.core.referring) replaces every task's instruction at
each reset by a program that picks out the target bowl alone in the scene the reset made, as in LIBERO's
``spatial_referring`` set; its tasks give no ``prompt``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


import mujoco
import numpy as np

from sgvla.core.mid_episode import Trigger, change_list, change_trigger, triggers_text
from sgvla.core.perturbation_files import Fail, PerturbationError, check_task_keys, parse_set, read_set
from sgvla.core.referring import ReferringSpec, parse_referring
from sgvla.paths import CONFIG_DIR
from sgvla.so101.twin.config import OBJECTS, TARGET, TaskLayout, TwinConfig, load_twin_config

PERTURBATION_DIR = CONFIG_DIR / "perturbations" / "so101_twin"
NONE = "none"  # the tasks as configured

_SET_KEYS = {"name", "description", "referring", "tasks"}
ONTOLOGY = "so101_tabletop"  # the nouns a referring vocabulary gives the twin's objects
_TASK_KEYS = {"prompt", "poses", "add", "remove", "during"}
PARKED_AT = np.array([0.0, 3.0, 0.05])  # world position, beside the rig and out of its cameras, of removed objects
SETTLE_S = 0.3  # seconds of physics, the arm held, after a mid-episode change


@dataclass(frozen=True)
class Swap:
    """Exchange where two objects stand (on the table or on a support); what stands on them follows."""

    a: str
    b: str


@dataclass(frozen=True)
class Move:
    """Shift a table object by ``by`` (x, y metres); what stands on it follows."""

    object: str
    by: tuple[float, float]


def _describe_ops(ops) -> list[str]:
    return [f"swap {op.a}<->{op.b}" if isinstance(op, Swap) else f"move {op.object} by {list(op.by)}" for op in ops]


@dataclass(frozen=True)
class MidEpisodeChange:
    """Pose operations and removals applied to the running simulation when ``when`` fires (sgvla.core.mid_episode)."""

    when: Trigger
    poses: tuple[Swap | Move, ...] = ()
    remove: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = _describe_ops(self.poses) + ([f"remove {','.join(self.remove)}"] if self.remove else [])
        return f"at {self.when}: {', '.join(parts)}"


@dataclass(frozen=True)
class TaskPerturbation:
    prompt: str | None = None
    poses: tuple[Swap | Move, ...] = ()
    add: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    remove: tuple[str, ...] = ()
    during: tuple[MidEpisodeChange, ...] = ()

    @property
    def triggers(self) -> str:
        """The mid-episode triggers as episode facts carry them ("" : none)."""
        return triggers_text([c.when for c in self.during])

    def describe(self) -> str:
        """A one-line summary for the episode record."""
        parts = [f"prompt '{self.prompt}'"] if self.prompt else []
        parts += _describe_ops(self.poses)
        parts += [f"add {name} at {list(xy)}" for name, xy in self.add.items()]
        parts += [f"remove {','.join(self.remove)}"] if self.remove else []
        parts += [c.describe() for c in self.during]
        return "; ".join(parts) or NONE

    def apply(self, task: TaskLayout) -> TaskLayout:
        """The perturbed layout (checked by TaskLayout itself; the caller checks it against the twin config)."""
        layout = {n: list(xy) for n, xy in task.layout.items()}
        on = dict(task.stands_on)
        for name in self.remove:
            layout.pop(name, None)
            on.pop(name, None)
        for op in self.poses:
            if isinstance(op, Move):
                if op.object not in layout:
                    raise ValueError(f"{op.object!r} stands on {on[op.object]!r} when it is moved; move its support")
                x, y = layout[op.object]
                layout[op.object] = [round(x + op.by[0], 6), round(y + op.by[1], 6)]
                continue
            where = {n: ("on", on[n]) if n in on else ("at", layout[n]) for n in (op.a, op.b)}
            for name, other in ((op.a, op.b), (op.b, op.a)):
                layout.pop(name, None)
                on.pop(name, None)
                kind, value = where[other]
                (on if kind == "on" else layout)[name] = value
        for name, xy in self.add.items():
            layout[name] = list(xy)
        return TaskLayout(self.prompt or task.prompt, task.place, layout, on)


@dataclass(frozen=True, eq=False)
class TwinPerturbations:
    name: str
    description: str = ""
    tasks: Mapping[int, TaskPerturbation] = field(default_factory=dict)
    source: str = "<code>"
    referring: ReferringSpec | None = None  # every instruction a spatially-referring program (module docstring)

    def for_task(self, task_id: int) -> TaskPerturbation:
        return self.tasks.get(task_id, TaskPerturbation())

    def layout(self, config: TwinConfig, task_id: int) -> TaskLayout:
        """Task ``task_id`` of ``config`` as this set leaves it."""
        return checked_layout(config, task_id, self.for_task(task_id), f"{self.source}: task {task_id}")


def checked_layout(config: TwinConfig, task_id: int, perturbation: TaskPerturbation, where: str) -> TaskLayout:
    try:
        layout = perturbation.apply(config.task(task_id))
        config.check_layout(layout, "the perturbed layout")
    except ValueError as exc:
        raise PerturbationError(f"{where}: {exc}") from None
    return layout


def available_perturbations() -> list[str]:
    return [NONE, *sorted(p.stem for p in PERTURBATION_DIR.glob("*.yaml"))]


def load_perturbations(name_or_path: str | Path, config: TwinConfig | None = None) -> TwinPerturbations:
    """``none``, ``config/perturbations/so101_twin/<name>.yaml`` or an explicit YAML path, checked against the
    twin's tasks (``config``: the default twin config)."""
    if str(name_or_path) == NONE:
        return TwinPerturbations(NONE, "The twin's tasks as configured.")
    data, path = read_set(name_or_path, PERTURBATION_DIR, available_perturbations(), "so101_twin perturbation set")
    return parse_perturbations(data, config or load_twin_config(), source=str(path), default_name=path.stem)


def parse_perturbations(data: Any, config: TwinConfig, source: str = "<data>",
                        default_name: str = "perturbations") -> TwinPerturbations:
    """Build and check a set from parsed YAML against the tasks of ``config``."""
    checked = parse_set(data, _SET_KEYS, range(len(config.tasks)), source)
    tasks = {}
    for task_id, entry in checked.tasks.items():
        tasks[task_id] = _parse_task(entry, config.task(task_id), checked.task_fail(task_id))
        checked_layout(config, task_id, tasks[task_id], f"{source}: task {task_id}")
    referring = parse_referring(checked.data.get("referring"), ONTOLOGY, checked.fail)
    prompted = sorted(t for t, p in tasks.items() if p.prompt is not None)
    if referring is not None and prompted:
        raise checked.fail("key 'referring'", f"replaces every task's instruction; task(s) {prompted} give a prompt")
    return TwinPerturbations(checked.name(default_name), checked.description, tasks, source, referring)


def _parse_task(entry: Any, task: TaskLayout, fail: Fail) -> TaskPerturbation:
    check_task_keys(entry, _TASK_KEYS, fail)

    remove = entry.get("remove", [])
    if not isinstance(remove, list) or not all(isinstance(n, str) for n in remove):
        raise fail("remove", "must be a list of object names")
    for name in remove:
        if name not in task.objects:
            raise fail("remove", f"{name!r} is not in this task's scene {list(task.objects)}")
        if name in (TARGET, task.place):
            raise fail("remove", f"{name!r} is a goal object (the target bowl or the place object)")
        standing = [o for o, s in task.stands_on.items() if s == name and o not in remove]
        if standing:
            raise fail("remove", f"{standing} stand on {name!r}")
    present = set(task.objects) - set(remove)

    add = entry.get("add", {})
    if not isinstance(add, dict):
        raise fail("add", "must map object names to table positions [x, y]")
    for name, xy in add.items():
        if name not in OBJECTS:
            raise fail("add", f"unknown object {name!r}; the twin's objects are {list(OBJECTS)}")
        if name in present:
            raise fail("add", f"{name!r} is already in this task's scene")
        if not isinstance(xy, list) or len(xy) != 2 or not all(isinstance(v, int | float) for v in xy):
            raise fail("add", f"the position of {name!r} must be [x, y], got {xy!r}")
    present |= set(add)

    prompt = entry.get("prompt")
    if prompt is not None:
        if not isinstance(prompt, str) or not prompt.strip():
            raise fail("prompt", "must be a non-empty string")
        noun = task.place.split("_")[-1]
        for word in ("bowl", noun):
            if word not in prompt.lower():
                raise fail("prompt", f"does not mention {word!r}; the goal (a black bowl onto the {noun}) cannot "
                                     "change")

    poses = entry.get("poses") or []
    if not isinstance(poses, list):
        raise fail("poses", "must be a list of operations")
    ops = tuple(_parse_op(op, present, fail) for op in poses)
    during = change_list(entry, fail)
    changes = tuple(_parse_change(c, task, present, fail) for c in during)
    return TaskPerturbation(prompt, ops, {n: (float(x), float(y)) for n, (x, y) in add.items()}, tuple(remove),
                            changes)


def _parse_change(change: Any, task: TaskLayout, present: set[str], fail: Fail) -> MidEpisodeChange:
    """One mid-episode change: its trigger, pose operations and removals (no goal object, no support)."""
    when = change_trigger(change, fail)
    poses = change.get("poses") or []
    if not isinstance(poses, list):
        raise fail("during", "'poses' must be a list of operations")
    ops = tuple(_parse_op(op, present, lambda _, msg: fail("during", msg)) for op in poses)
    remove = change.get("remove", [])
    if not isinstance(remove, list) or not all(isinstance(n, str) for n in remove):
        raise fail("during", "'remove' must be a list of object names")
    for name in remove:
        if name not in present:
            raise fail("during", f"cannot remove {name!r}: not in this scene {sorted(present)}")
        if name in (TARGET, task.place):
            raise fail("during", f"cannot remove {name!r}: a goal object (the target bowl or the place object)")
        if any(s == name for s in task.stands_on.values()):
            raise fail("during", f"cannot remove {name!r}: objects stand on it")
    if not ops and not remove:
        raise fail("during", f"the change at {when} changes nothing: give 'poses' and/or 'remove'")
    return MidEpisodeChange(when, ops, tuple(remove))


def apply_change(twin, change: MidEpisodeChange) -> None:
    """Apply a mid-episode change to a running `So101Twin` (see the module docstring), the arm held while it settles."""
    model, data = twin.model, twin.data
    dependents = {}
    for obj, support in twin.layout.stands_on.items():
        dependents.setdefault(support, []).append(obj)

    def joint(name: str):
        from sgvla.sim.mujoco_state import free_joint

        found = free_joint(model, int(twin.index.body_ids[twin.index.column(name)]))
        if found is None:
            raise PerturbationError(f"{name!r} has no free joint and cannot be moved")
        return found

    def shift(name: str, by: np.ndarray) -> None:
        for n in (name, *dependents.get(name, [])):
            j = joint(n)
            data.qpos[j.qpos.start: j.qpos.start + 3] += by
            data.qvel[j.qvel] = 0.0

    with twin.lock:
        for op in change.poses:
            if isinstance(op, Move):
                shift(op.object, np.array([*op.by, 0.0]))
                continue
            pa, pb = (data.qpos[joint(n).qpos.start: joint(n).qpos.start + 3].copy() for n in (op.a, op.b))
            shift(op.a, pb - pa)
            shift(op.b, pa - pb)
        for k, name in enumerate(change.remove):
            j = joint(name)
            data.qpos[j.qpos.start: j.qpos.start + 3] = PARKED_AT + [0.3 * k, 0.0, 0.0]
            data.qvel[j.qvel] = 0.0
        arm_q, arm_v = data.qpos[twin._qpos].copy(), twin._dof
        for _ in range(int(round(SETTLE_S / model.opt.timestep))):
            mujoco.mj_step(model, data)
            data.qpos[twin._qpos] = arm_q
            data.qvel[arm_v] = 0.0
        mujoco.mj_forward(model, data)


def _parse_op(op: Any, present: set[str], fail: Fail) -> Swap | Move:
    def check(name: Any) -> str:
        if name not in present:
            raise fail("poses", f"{name!r} is not an object of this scene; it has {sorted(present)}")
        return name

    if isinstance(op, dict) and set(op) == {"swap"}:
        pair = op["swap"]
        if not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1]:
            raise fail("poses", f"swap needs two different objects, got {pair!r}")
        return Swap(check(pair[0]), check(pair[1]))
    if isinstance(op, dict) and set(op) == {"move"} and isinstance(op["move"], dict):
        move = op["move"]
        if set(move) != {"object", "by"}:
            raise fail("poses", f"move needs 'object' and 'by' [dx, dy], got keys {sorted(move)}")
        name, by = check(move["object"]), move["by"]
        if not isinstance(by, list) or len(by) != 2 or not all(isinstance(v, int | float) for v in by):
            raise fail("poses", f"'by' must be [dx, dy] in metres, got {by!r}")
        return Move(name, (float(by[0]), float(by[1])))
    raise fail("poses", f"each operation is {{swap: [a, b]}} or {{move: {{object, by}}}}, got {op!r}")


__all__ = ["NONE", "PerturbationError", "TaskPerturbation", "TwinPerturbations", "available_perturbations",
           "load_perturbations", "parse_perturbations"]
