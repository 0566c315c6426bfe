"""Mid-episode perturbations: when a scene changes during an episode, read the same way by whoever applies the
change and whoever records it.

Every other perturbation is applied at reset. A mid-episode one asks the closed-loop question (the method's paper,
conclusion): does a policy follow when the relations change while it acts? A perturbation set declares it per
task as data (``during:`` in a LIBERO or twin set file): a trigger and the change it fires::

    during:
      - when: reached                  # a progress stage of the goal (sgvla.core.progress): reached, grasped, ...
        poses: [{swap: [bowl_a, bowl_b]}]
      - when: {step: 40}               # or a step: after the 40th action
        remove: [cookies_1]

What each change does belongs to the embodiment (its perturbation module); when it fires is decided here, once:
a :class:`MidEpisodeWatch` reads the scenes of an episode in order, the scene of step ``k`` being the one after
``k`` actions (0: the first), and a trigger fires at the first scene that satisfies it. The backend that owns the
simulator applies a change that fired at step ``k`` before it applies action ``k + 1`` (the policy acted on the scene
of step ``k`` before it changed); the episode engine (`sgvla.core.episode`) runs its own watch on the same scenes and
records the steps (``mid_episode_steps``), so a run over topics, where the simulator is another node's, records what
the in-process run records. Both learn the triggers from the same text (:func:`triggers_text`, the backend's
``episode_info()["mid_episode_triggers"]`` and the record fact of that name).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sgvla.core.progress import STAGES, PickPlaceSpec, PickPlaceStages

# Stages a change may wait for; `placed` is success, when the episode is over.
TRIGGER_STAGES = tuple(s for s in STAGES if s != "placed")
TRIGGERS_KEY = "mid_episode_triggers"  # episode_info / record fact: the triggers as text
STEPS_KEY = "mid_episode_steps"  # record: the step each trigger fired at (None: never)


@dataclass(frozen=True)
class Trigger:
    """A step (``step``: after that many actions) or a progress stage of the goal (``stage``); exactly one."""

    step: int | None = None
    stage: str | None = None

    def __str__(self) -> str:
        return f"step {self.step}" if self.step is not None else str(self.stage)


def parse_trigger(value: Any, fail: Callable[[str], Exception]) -> Trigger:
    """``reached`` (a stage), ``{stage: reached}`` or ``{step: 40}``; ``fail(msg)`` makes the error to raise."""
    if isinstance(value, dict) and len(value) == 1 and "stage" in value:
        value = value["stage"]
    if isinstance(value, str):
        if value not in TRIGGER_STAGES:
            raise fail(f"unknown stage {value!r}; a change fires at one of {list(TRIGGER_STAGES)} or at {{step: N}}")
        return Trigger(stage=value)
    if isinstance(value, dict) and set(value) == {"step"}:
        step = value["step"]
        if not isinstance(step, int) or isinstance(step, bool) or step < 1:
            raise fail(f"step must be a positive integer (actions taken before the change), got {step!r}")
        return Trigger(step=step)
    raise fail(f"'when' is a stage ({', '.join(TRIGGER_STAGES)}), {{stage: <stage>}} or {{step: N}}, got {value!r}")


CHANGE_KEYS = frozenset({"when", "poses", "remove"})  # what a suite's mid-episode change may hold


def change_list(entry: dict, fail: Callable[[str, str], Exception]) -> list:
    """A task entry's ``during`` list (empty when absent); ``fail(key, msg)`` makes the error to raise."""
    during = entry.get("during") or []
    if not isinstance(during, list):
        raise fail("during", "must be a list of changes {when, poses, remove}")
    return during


def change_trigger(change: Any, fail: Callable[[str, str], Exception]) -> Trigger:
    """The trigger of one change of a ``during`` list, after checking that it is a mapping of known keys; the
    suite parses its poses and removals (they name its own objects)."""
    if not isinstance(change, dict) or "when" not in change:
        raise fail("during", f"each change is a mapping with 'when' and 'poses' and/or 'remove', got {change!r}")
    unknown = sorted(set(change) - CHANGE_KEYS)
    if unknown:
        raise fail("during", f"unknown key {unknown[0]!r}; a change has {sorted(CHANGE_KEYS)}")
    return parse_trigger(change["when"], lambda msg: fail("during", msg))


def triggers_text(triggers: Sequence[Trigger]) -> str:
    """The triggers as the text episode facts carry: ``reached; step 40``."""
    return "; ".join(map(str, triggers))


def triggers_of(text: str) -> tuple[Trigger, ...]:
    """The triggers of :func:`triggers_text`'s text ("" : none)."""
    out = []
    for part in filter(None, (p.strip() for p in str(text or "").split(";"))):
        out.append(Trigger(step=int(part.split()[1])) if part.startswith("step ") else Trigger(stage=part))
    return tuple(out)


class MidEpisodeWatch:
    """Which triggers fired, and at which step, from an episode's scenes in order (see the module docstring).

    Stage triggers read the goal's stages with the suite's spec (a tracker of their own, fed every scene); without
    a spec or a goal, a stage trigger never fires."""

    def __init__(self, triggers: Sequence[Trigger], spec: PickPlaceSpec | None, goal: Sequence[str] | None):
        self.triggers = tuple(triggers)
        self.fired: list[int | None] = [None] * len(self.triggers)
        self.tracker: PickPlaceStages | None = None
        if spec is not None and goal and any(t.stage for t in self.triggers):
            self.tracker = spec.tracker(*goal)

    @property
    def pending(self) -> bool:
        return any(f is None for f in self.fired)

    def observe(self, step: int, scene: Any) -> list[int]:
        """The indices of the triggers that fire at the scene of `step` (each fires once)."""
        if not self.pending:
            return []
        if self.tracker is not None and scene is not None:
            self.tracker.observe(step, scene)
        now = []
        for i, t in enumerate(self.triggers):
            if self.fired[i] is not None:
                continue
            due = (t.step is not None and step >= t.step) or (
                t.stage is not None and self.tracker is not None and t.stage in self.tracker.first)
            if due:
                self.fired[i] = step
                now.append(i)
        return now


__all__ = ["CHANGE_KEYS", "STEPS_KEY", "TRIGGERS_KEY", "TRIGGER_STAGES", "MidEpisodeWatch", "Trigger",
           "change_list", "change_trigger", "parse_trigger",
           "triggers_of", "triggers_text"]
