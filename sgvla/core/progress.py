"""Progress of a pick-and-place episode, not only its success: the stages it reached and when, a score in [0, 1],
and why it failed.

Success alone cannot tell a policy that never reached the bowl from one that carried it over the plate and let go
early. A :class:`PickPlaceStages` tracker reads, every step, the scene the success check reads (object positions
and geometry, the end effector, the gripper) and keeps the first step each stage was reached:

    reached     the end effector within ``reach`` of the target's box
    grasped     the gripper closed at the target, and the target moved since it closed (it comes along; a bowl
                nudged by open fingers, then closed on nothing, is no grasp)
    lifted      the target ``lift`` above its start height, at the end effector (carried, not knocked over)
    over_place  after the lift: the target's centre over the place object's footprint, above its top
    placed      the success check's verdict (the backend's; the operator's on the arm), never geometry

Stages are cumulative: a later stage implies the earlier ones, which are recorded at its step when they were not
seen before (a lift seen before the gripper read as closed is still a grasp). The score is the fraction reached.
A failed episode gets one class (:func:`summarize`, first that applies): ``gave_up`` (the policy raised
PolicyGaveUp; ``perceived_nothing`` when what it was given lacked the goal's objects or its reason says it perceived
nothing), ``unknown`` (no scene observed: nothing to classify by), ``wrong_object`` (another object was grasped or
lifted while the target was not held: the look-alike bowl), ``perceived_nothing`` (scenes came, never with the
target), ``dropped`` (lifted, not held at the end), ``missed_grasp`` (the gripper closed at the target, which was
never lifted and is not held at the end), ``timed_out`` (otherwise: the step limit, or the operator's stop, came
first; a policy still on its way to the bowl has not missed a grasp).

Core code: it knows no robot. The thresholds and how to read the gripper are the suite's (:class:`PickPlaceSpec`),
the target and place the task goal's (what its success check reads).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from sgvla.core.state import object_aabbs

STAGES = ("reached", "grasped", "lifted", "over_place", "placed")
GAVE_UP, PERCEIVED_NOTHING, UNKNOWN = "gave_up", "perceived_nothing", "unknown"
WRONG_OBJECT, DROPPED, MISSED_GRASP, TIMED_OUT = "wrong_object", "dropped", "missed_grasp", "timed_out"
FAILURE_CLASSES = (WRONG_OBJECT, MISSED_GRASP, DROPPED, TIMED_OUT, GAVE_UP, PERCEIVED_NOTHING, UNKNOWN)
# A give-up whose reason says the scene lacked what the policy needed (sgvla.policies.scripted.require_objects:
# "... in the scene it was given (...)") or that nothing was perceived or detected.
_NOTHING_PERCEIVED = re.compile(r"perceiv|detect|in the scene it was given", re.IGNORECASE)


@dataclass(frozen=True)
class PickPlaceSpec:
    """One embodiment's thresholds (metres) and gripper reading. The gripper's opening is ``opening`` dotted with
    the scene's ``gripper_qpos`` (the Panda's two fingers: (1, -1), their gap; the SO101 jaw: (1,), its angle); it
    counts as closed below ``closed_below``."""

    opening: tuple[float, ...]
    closed_below: float
    reach: float = 0.02  # end effector to the target's box: reached, and "at" it for a grasp or a lift
    moved: float = 0.01  # the target's displacement since the gripper closed at it that shows it comes along
    lift: float = 0.03  # the target's height above its start that counts as lifted
    footprint_margin: float = 0.0  # grows (+) or shrinks (-) the place object's footprint for over_place

    def closed(self, gripper_qpos) -> bool:
        q = np.asarray(gripper_qpos, np.float64).reshape(-1)
        if q.shape != (len(self.opening),):
            raise ValueError(f"gripper_qpos has {q.size} values, the spec reads {len(self.opening)}")
        return float(np.dot(self.opening, q)) < self.closed_below

    def tracker(self, target: str, place: str) -> PickPlaceStages:
        return PickPlaceStages(self, target, place)


class PickPlaceStages:
    """The stages of moving `target` onto `place`, from the scenes it is shown (:meth:`observe`, with the step)."""

    def __init__(self, spec: PickPlaceSpec, target: str, place: str) -> None:
        self.spec, self.target, self.place = spec, target, place
        self.first: dict[str, int] = {}  # stage -> the first step it was reached (placed: see `stages`)
        self.start: dict[str, np.ndarray] = {}  # object -> its position when first seen
        self.scenes = 0
        self.seen_target = False
        self.held = False  # the target held at the last scene that showed it
        self.tried = False  # the gripper was closed at the target (a grasp was tried)
        self.closed_from: dict[str, np.ndarray] = {}  # object -> where it was when the gripper closed at it (now)
        self.wrong = ""  # the first other object grasped or lifted while the target was not held
        self.last_objects: tuple[str, ...] = ()  # the objects of the last scene (what a give-up was given)

    def observe(self, step: int, scene) -> None:
        """The scene after `step` steps (0: the first). Objects missing from it (not perceived) are skipped."""
        spec = self.spec
        self.scenes += 1
        self.last_objects = tuple(scene.objects)
        positions = np.asarray(scene.positions, np.float64).reshape(-1, 3)
        centers, halves = object_aabbs(scene)
        eef = np.asarray(scene.eef_pos, np.float64)
        closed = spec.closed(scene.gripper_qpos)
        index = {name: i for i, name in enumerate(scene.objects)}
        for name, i in index.items():
            self.start.setdefault(name, positions[i].copy())

        def near(i: int) -> bool:
            offset = eef - centers[i]
            return float(np.linalg.norm(offset - np.clip(offset, -halves[i], halves[i]))) <= spec.reach

        def comes_along(i: int, name: str) -> bool:
            """Closed at it, and it moved since the gripper closed there."""
            if not (closed and near(i)):
                self.closed_from.pop(name, None)
                return False
            since = self.closed_from.setdefault(name, positions[i].copy())
            return float(np.linalg.norm(positions[i] - since)) >= spec.moved

        def raised(i: int, name: str) -> bool:
            return float(positions[i, 2] - self.start[name][2]) >= spec.lift

        held = False
        if self.target in index:
            self.seen_target = True
            t = index[self.target]
            at = near(t)
            held = comes_along(t, self.target)
            self.tried = self.tried or (closed and at)
            level = -1
            if at:
                level = 0
            if held:
                level = 1
            if at and raised(t, self.target):
                level = 2
            if (level == 2 or "lifted" in self.first) and self.place in index and self._over_place(
                    t, index[self.place], centers, halves):
                level = 3
            for stage in STAGES[:level + 1]:
                self.first.setdefault(stage, step)
            self.held = held
        for name, i in index.items():
            if name != self.target:
                taken = comes_along(i, name) or (near(i) and raised(i, name))  # (keeps where it was when closed at)
                if taken and not held and not self.wrong:
                    self.wrong = name

    def _over_place(self, t: int, p: int, centers: np.ndarray, halves: np.ndarray) -> bool:
        inside = np.abs(centers[t, :2] - centers[p, :2]) <= halves[p, :2] + self.spec.footprint_margin
        return bool(inside.all() and centers[t, 2] > centers[p, 2] + halves[p, 2])

    def stages(self, success: bool, steps: int) -> dict[str, int]:
        """Stage -> first step, the reached ones in order; success reaches every stage (placed at `steps`)."""
        if not success:
            return dict(self.first)
        return {stage: self.first.get(stage, steps) for stage in STAGES}


@dataclass(frozen=True)
class Progress:
    """What a record holds of an episode's progress: the score (None: unknown, no scene showed the target), the
    stages reached (stage -> first step) and the failure class ("" on success)."""

    progress: float | None
    stages: dict[str, int]
    failure_class: str


def summarize(tracker: PickPlaceStages | None, success: bool, steps: int, gave_up: str = "") -> Progress:
    """The progress of a finished episode; `tracker` None where nothing tracked stages (no scene: unknown)."""
    known = tracker is not None and tracker.seen_target
    stages = tracker.stages(success, steps) if known else {}
    progress = len(stages) / len(STAGES) if known else None
    return Progress(progress, stages, "" if success else _failure_class(tracker, gave_up))


def _failure_class(tracker: PickPlaceStages | None, gave_up: str) -> str:
    seen = tracker is not None and tracker.scenes > 0
    if gave_up:
        lacking = seen and not {tracker.target, tracker.place} <= set(tracker.last_objects)
        return PERCEIVED_NOTHING if lacking or _NOTHING_PERCEIVED.search(gave_up) else GAVE_UP
    if not seen:
        return UNKNOWN
    if tracker.wrong:
        return WRONG_OBJECT
    if not tracker.seen_target:
        return PERCEIVED_NOTHING
    if "lifted" in tracker.first and not tracker.held:
        return DROPPED
    if tracker.tried and "lifted" not in tracker.first and not tracker.held:
        return MISSED_GRASP
    return TIMED_OUT
