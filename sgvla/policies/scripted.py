"""Scripted policies for CPU evaluation: the privileged expert, the prompt-grounded policy, and `hold` (joints only).

The first two drive the backend's pick-and-place controller (`StepInput.info["pick_place"](target, place)`:
LIBERO's `sgvla.libero.expert.PickPlaceController`, the SO101 twin's IK controller). The
expert is told the target by the task's goal: an upper bound that ignores the prompt. The
prompt-grounded policy is not: it resolves "the black bowl ..." from the prompt it receives (its
wording, and an injected scene graph when present) against unlabeled bowl positions, so its
success measures what the prompt's information is worth, independent of a VLA's capacity to use
it. Both read `StepInput.info["goal"]` = (target, place) and `info["table_center"]` from the loop.

Both read the scene they are given, which on the SO101 is the perceived one: when it lacks what they need (no
bowl perceived, no place object), they give up (`PolicyGaveUp`), a failure of the system under test with that
reason, not an infrastructure failure. Except before their first action: an episode in which the policy never acted
has no result (`sgvla.core.episode`), and is filed as an infrastructure failure with the give-up as its cause.

Both re-plan when the scene changes under them (a mid-episode perturbation, `sgvla.core.mid_episode`; a person
moving a bowl): :class:`MovedObjects` tells an object moved by something other than the robot (its centre jumped
`JUMP` or more sideways between two consecutive scenes and ended `AWAY` or more from the gripper; a carried bowl
stays at the gripper, a pushed one moves millimetres a step). The expert re-plans when its goal's target moved.
prompt_grounded re-grounds *on change*, not every step: when one of the look-alike candidates moved, it grounds the
prompt it is given now (with a live graph, the graph of this step; with ``frozen_graph``, the first step's) against
the scene as it is now, and re-plans when its target changed or moved. Not every step, because the relations its
prompt states stop holding once the robot carries the bowl (a bowl lifted off the plate's left is no longer left of
it), so grounding each step would switch bowls mid-carry; grounding once (as before) would keep a bowl the prompt
no longer means, by a name the policy has no right to know.

A spatially-referring instruction (the `spatial_referring` sets; `sgvla.core.referring`): the expert is told the
true target (the goal) as always; prompt_grounded reads the program from the words with its vocabulary (option
`referring`) and resolves it on the injected graph only, guessing among the noun's candidates without one
(`sgvla.policies.grounding` says why).
"""

import random
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sgvla.core.protocols import PolicyGaveUp, PromptBudget, StepInput
from sgvla.core.referring import ReferringError, Vocabulary, load_vocabulary
from sgvla.policies.grounding import TIE_BREAKS, Grounding, PerceivedScene, ground_target, split_prompt
from sgvla.policies.registry import PolicyConfig
from sgvla.scene_graph import Ontology
from sgvla.core.state import object_aabbs


def pick_place(info: dict[str, Any], target: str, place: str):
    """The backend's controller moving ``target`` onto ``place``."""
    factory = info.get("pick_place")
    if factory is None:
        raise ValueError("StepInput.info has no 'pick_place' controller factory; scripted policies drive the "
                         "backend's controller (EpisodeRunner and the ROS policy node provide it)")
    return factory(target, place)


def require_objects(scene, *names: str, any_of: bool = False) -> None:
    """PolicyGaveUp when ``scene`` (perceived, on the arm) lacks one of ``names`` (with ``any_of``: all of them)."""
    missing = [n for n in names if n not in scene.objects]
    lacking = len(missing) == len(names) if any_of else bool(missing)
    if lacking:
        what = f"none of {', '.join(names)}" if any_of else ", ".join(missing)
        raise PolicyGaveUp(f"{what} in the scene it was given ({', '.join(scene.objects) or 'empty'})")


def candidate_group(ontology: Ontology) -> tuple[str, ...]:
    """The objects interchangeable with the manipulated one (the two identical bowls), itself included."""
    return next((g for g in ontology.interchangeable if ontology.manipulated in g), (ontology.manipulated,))

JUMP = 0.03  # metres an object's centre moves sideways between two scenes when something else moved it
AWAY = 0.05  # metres (sideways) from the gripper it ends up: not the robot's own push or carry


class MovedObjects:
    """Which of some objects something other than the robot moved since the last scene (see the module docstring)."""

    def __init__(self) -> None:
        self.last: dict[str, np.ndarray] = {}

    def moved(self, scene, names) -> list[str]:
        out = []
        for name in names:
            if name not in scene.objects:  # a perceived scene may lack it (and the gripper's position)
                continue
            eef = np.asarray(scene.eef_pos, float)[:2]
            now = np.asarray(scene.position(name), float)
            before = self.last.get(name)
            self.last[name] = now.copy()
            if before is not None and np.linalg.norm(now[:2] - before[:2]) >= JUMP \
                    and np.linalg.norm(now[:2] - eef) >= AWAY:
                out.append(name)
        return out


class ScriptedPolicy:
    """What every scripted policy shares: no tokenizer (no prompt budget) and nothing to free."""

    def prompt_budget(self, prompt: str) -> PromptBudget | None:
        return None

    def close(self) -> None:
        pass


_PLACE = re.compile(r"\b(?:place|put) it (?:on|onto|in|into) (?:the )?(?P<obj>[a-z ]+?)\s*$")


class ExpertPolicy(ScriptedPolicy):
    """Privileged: picks the goal's target object, whatever the prompt says."""

    def __init__(self, name: str = "expert"):
        self.name = name
        self.controller = None
        self.watch = MovedObjects()
        self.replans = 0

    def reset(self, prompt: str, seed: int | None = None) -> None:
        self.controller = None
        self.watch = MovedObjects()
        self.replans = 0

    def act(self, step: StepInput) -> np.ndarray:
        target, place = step.info["goal"]
        moved = self.watch.moved(step.scene, [target])
        if self.controller is None or moved:
            self.replans += self.controller is not None
            require_objects(step.scene, target, place)
            self.controller = pick_place(step.info, target, place)
        return self.controller.act(step.scene)

    def decision(self) -> dict[str, Any]:
        return {"target": self.controller.target_object if self.controller else None, "source": "goal",
                **({"replans": self.replans} if self.replans else {})}


def perceive(scene, ontology: Ontology, table_center) -> tuple[PerceivedScene, list[str]]:
    """Candidates: the objects interchangeable with the manipulated one, ordered by position so
    their order carries no identity. Landmarks: every other object, by name."""
    group = candidate_group(ontology)
    names = sorted((n for n in scene.objects if n in group), key=lambda n: tuple(np.round(scene.position(n), 4)))
    landmarks = {n: scene.position(n) for n in scene.objects if n not in group}
    candidates = np.array([scene.position(n) for n in names])
    centers, halves = object_aabbs(scene)
    box = {n: np.stack([c, h]) for n, c, h in zip(scene.objects, centers, halves, strict=True)}
    return PerceivedScene(candidates, landmarks, np.asarray(table_center, float),
                          np.array([box[n] for n in names]), {n: box[n] for n in landmarks}), names


class PromptGroundedPolicy(ScriptedPolicy):
    """Resolves the target from the prompt; see the module docstring."""

    def __init__(self, ontology: Ontology, name: str = "prompt_grounded", tie_break: str = "random",
                 vocabulary: Vocabulary | None = None):
        self.name = name
        self.ontology = ontology
        self.tie_break = tie_break
        self.vocabulary = vocabulary  # reads spatially-referring programs (sgvla.policies.grounding)
        self.seed = 0
        self.prompt = ""
        self.grounding: Grounding | None = None
        self.target: str | None = None
        self.place: str | None = None
        self.controller = None
        self.watch = MovedObjects()
        self.regrounded = 0  # groundings after the first (a candidate moved)

    def reset(self, prompt: str, seed: int | None = None) -> None:
        self.prompt = prompt
        self.grounding = self.target = self.place = self.controller = None
        self.seed = 0 if seed is None else int(seed)
        self.watch = MovedObjects()
        self.regrounded = 0

    def tie_rng(self, task: str) -> random.Random:
        """The coin of a tie: seeded by the episode's seed and task (the suite's task, not the prompt), so an episode
        breaks it the same way in every mode and runner, and the episodes of a plan draw independent coins."""
        return random.Random(f"prompt_grounded tie {self.seed} {task}")

    def _place_object(self, goal_place: str) -> str:
        instruction, _ = split_prompt(self.prompt)
        m = _PLACE.search(instruction.lower().rstrip(". "))
        resolved = self.ontology.resolve(m.group("obj")) if m else None
        return resolved or goal_place

    def act(self, step: StepInput) -> np.ndarray:
        moved = self.watch.moved(step.scene, candidate_group(self.ontology))
        if self.controller is None or moved:
            # Ground on the first observation and again when a candidate moved (module docstring: on change).
            before = self.target
            self.regrounded += self.controller is not None
            self.prompt = step.prompt
            require_objects(step.scene, *candidate_group(self.ontology), any_of=True)
            scene, names = perceive(step.scene, self.ontology, step.info["table_center"])
            self.grounding = ground_target(step.prompt, scene, self.ontology, task=step.scene.task,
                                           tie_break=self.tie_break, rng=self.tie_rng(step.scene.task),
                                           vocabulary=self.vocabulary)
            self.target = names[self.grounding.index]
            self.place = self._place_object(step.info["goal"][1])
            require_objects(step.scene, self.place)
            if self.controller is None or self.target != before or self.target in moved:
                self.controller = pick_place(step.info, self.target, self.place)
        return self.controller.act(step.scene)

    def decision(self) -> dict[str, Any]:
        if self.grounding is None:
            return {}
        return {"target": self.target, "place": self.place, "grounding_source": self.grounding.source,
                "grounding_evidence": self.grounding.evidence,
                "grounding_correct": self.target == self.ontology.manipulated,
                **({"regrounded": self.regrounded} if self.regrounded else {})}


@PolicyConfig.register("expert")
@dataclass
class ExpertConfig(PolicyConfig):
    needs_scene: ClassVar[bool] = True
    reads_goal: ClassVar[bool] = True

    def make(self, *, ontology: Ontology, env_config: Any = None) -> ExpertPolicy:
        return ExpertPolicy(self.display_name)


@PolicyConfig.register("prompt_grounded")
@dataclass
class PromptGroundedConfig(PolicyConfig):
    needs_scene: ClassVar[bool] = True
    # A tie among equally plausible candidates: `random` (seeded per episode: chance, as for a policy told
    # nothing) or `first` (the first in position order: a fixed rule, 0% or 100% per layout).
    tie_break: str = "random"
    # The vocabulary of config/referring/ whose programs it reads ("the black bowl that is left of ..."; "": none).
    referring: str = "spatial"

    def __post_init__(self) -> None:
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"policy {self.display_name}: tie_break must be one of {TIE_BREAKS}, "
                             f"got {self.tie_break!r}")
        if self.referring:
            try:
                load_vocabulary(self.referring)
            except ReferringError as exc:
                raise ValueError(f"policy {self.display_name}: referring: {exc}") from None

    def make(self, *, ontology: Ontology, env_config: Any = None) -> PromptGroundedPolicy:
        vocabulary = load_vocabulary(self.referring) if self.referring else None
        return PromptGroundedPolicy(ontology, self.display_name, self.tie_break, vocabulary)


class HoldPolicy(ScriptedPolicy):
    """Reads joint states only: holds the pose it starts in, the base joint turning `pan_step_deg` per step (0: it
    holds still). A policy for protocol runs on the arm (the operator's confirm, verdict, redo, home pose) that
    needs no model and no privileged scene."""

    def __init__(self, name: str = "hold", pan_step_deg: float = 0.0):
        self.name = name
        self.pan_step_deg = pan_step_deg
        self.start: np.ndarray | None = None
        self.steps = 0

    def reset(self, prompt: str, seed: int | None = None) -> None:
        self.start, self.steps = None, 0

    def act(self, step: StepInput) -> np.ndarray:
        if self.start is None:
            self.start = np.asarray(step.observation["agent_pos"], dtype=np.float64).copy()
        self.steps += 1
        action = self.start.copy()
        action[0] += self.pan_step_deg * self.steps
        return action

    def decision(self) -> dict[str, Any]:
        return {}


@PolicyConfig.register("hold")
@dataclass
class HoldConfig(PolicyConfig):
    pan_step_deg: float = 0.0  # degrees the base joint turns per step (the arm's safety layer bounds it too)

    def make(self, *, ontology: Ontology, env_config: Any = None) -> HoldPolicy:
        return HoldPolicy(self.display_name, self.pan_step_deg)
