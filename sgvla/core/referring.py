"""Spatially-referring instructions (issue 42.3): small programs over spatial relations, generated per scene from
its ground-truth graph, worded from data, read back from their words, and evaluated on a graph.

ESPIRE (seed 001) builds instructions as programs over relations and balances them by kind; LIBERO's own prompts
name the target bowl by one fixed phrase per task. Here a program picks an object out of a scene:

    Program(noun="black bowl", hop=Hop("left_of", "plate_1"))                       one hop
    Program("black bowl", Hop("left_of", Program("object", Hop("in_front_of", "plate_1"))))   two hops

worded (config/referring/spatial.yaml) "pick up the black bowl that is left of the object that is in front of the
plate and place it on the plate". A hop's relation is a registered :class:`ReferringRelation`: ``triplet`` (the
candidate stands in that relation to the anchor in the graph, read in both directions through the ontology's
inverses) or ``nearest`` / ``farthest`` (by distance to the anchor, with a margin: two candidates closer than the
margin to the extreme both qualify, so a program keeps no near-tie). A family is a relation with its phrase, or
``hops: 2`` (two hops over the one-hop families). A user adds a family to the YAML, or registers a class.

Evaluation reads a :class:`ReferringScene`: the objects with their nouns, the graph's triplets and, where known,
positions (nearest/farthest need them; the ground-truth graph source knows every object's pose, a policy what it
perceives). ``select`` gives every object the program can mean; the generator keeps a program only where that is
exactly the target (uniqueness at every hop: an anchor expression must pick exactly one object too).

Balance: an episode's family is fixed by its place in the plan, ``seed * tasks + task`` counted round the families
(:meth:`Vocabulary.family_for`), so a plan of every task and consecutive seeds gives each family the same number of
episodes, to one, where every scene has a unique program of every family. A scene often has not (a bowl stands on
nothing: no "on"; both bowls left of every landmark: no "left of"); its episode then draws (seeded) among the
families it has, so the shortfall spreads over them instead of piling onto one; the record says which. Within its
family the program is a seeded draw, so a seed always gives the same instruction.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from sgvla.core.perturbation_files import read_set
from sgvla.core.registry import Choice
from sgvla.core.state import ground_truth_views
from sgvla.paths import CONFIG_DIR
from sgvla.scene_graph.ontology import INVERSE, RELATIONS
from sgvla.scene_graph.triplet import Graph

REFERRING_DIR = CONFIG_DIR / "referring"
ANY = "object"  # the noun of an inner expression: any object
FAMILY_KEY, PROGRAM_KEY = "referring_family", "referring_program"  # record facts


class ReferringError(ValueError):
    """A vocabulary file or a program that cannot be used."""


@dataclass(frozen=True)
class Hop:
    relation: str  # a family name of the vocabulary (one hop)
    anchor: str | Program  # an object, or an expression that picks exactly one out


@dataclass(frozen=True)
class Program:
    noun: str  # what the expression refers to ("black bowl"; ANY: any object)
    hop: Hop

    @property
    def hops(self) -> int:
        return 1 + (self.hop.anchor.hops if isinstance(self.hop.anchor, Program) else 0)

    def __str__(self) -> str:
        """The program as records carry it: ``left_of(black bowl, in_front_of(object, plate_1))``."""
        return f"{self.hop.relation}({self.noun}, {self.hop.anchor})"


@dataclass(frozen=True, eq=False)
class ReferringScene:
    """What a program is evaluated on: objects with nouns, the graph's triplets, positions where known."""

    nouns: Mapping[str, str]  # object -> noun; the objects a program may mean
    graph: Graph
    positions: Mapping[str, np.ndarray] = field(default_factory=dict)
    facts: frozenset = field(init=False, repr=False)  # the graph's triplets and their inverses

    def __post_init__(self) -> None:
        facts = {tuple(t) for t in self.graph} | {(o, INVERSE[r], s) for s, r, o in self.graph}
        object.__setattr__(self, "facts", frozenset(facts))

    def holds(self, subject: str, relation: str, obj: str) -> bool:
        return (subject, relation, obj) in self.facts


@dataclass
class ReferringRelation(Choice, kind="referring relation"):
    """How a one-hop family picks candidates relative to an anchor; registered by name, options from the YAML."""

    def select(self, candidates: Sequence[str], anchor: str, scene: ReferringScene) -> set[str]:
        raise NotImplementedError


@ReferringRelation.register("triplet")
@dataclass
class TripletRelation(ReferringRelation):
    """The candidates the graph states in `relation` to the anchor (either direction of the triplet)."""

    relation: str = "is_left_of"

    def __post_init__(self) -> None:
        if self.relation not in RELATIONS:
            raise ReferringError(f"unknown relation {self.relation!r}; the ontology's are {list(RELATIONS)}")

    def select(self, candidates: Sequence[str], anchor: str, scene: ReferringScene) -> set[str]:
        return {c for c in candidates if scene.holds(c, self.relation, anchor)}


@dataclass
class DistanceRelation(ReferringRelation):
    """The candidates at the extreme distance to the anchor (horizontal, metres), and any within `margin` of it."""

    margin: float = 0.03
    sign: ClassVar[float] = 1.0  # +1: nearest, -1: farthest

    def select(self, candidates: Sequence[str], anchor: str, scene: ReferringScene) -> set[str]:
        if anchor not in scene.positions:
            return set()
        at = np.asarray(scene.positions[anchor], float)[:2]
        known = [c for c in candidates if c in scene.positions]
        if len(known) < len(candidates) or not known:
            return set()  # a candidate without a position could be the one
        d = {c: self.sign * float(np.linalg.norm(np.asarray(scene.positions[c], float)[:2] - at)) for c in known}
        best = min(d.values())
        return {c for c, v in d.items() if v <= best + self.margin}


@ReferringRelation.register("nearest")
@dataclass
class Nearest(DistanceRelation):
    sign: ClassVar[float] = 1.0


@ReferringRelation.register("farthest")
@dataclass
class Farthest(DistanceRelation):
    sign: ClassVar[float] = -1.0


@dataclass(frozen=True)
class Family:
    name: str
    phrase: str = ""  # one hop: its words ("left of")
    relation: ReferringRelation | None = None  # one hop
    hops: int = 1


def select(program: Program, scene: ReferringScene, families: Mapping[str, Family]) -> set[str]:
    """Every object of `scene` the program can mean (an anchor expression that is not unique means none)."""
    anchor = program.hop.anchor
    if isinstance(anchor, Program):
        found = select(anchor, scene, families)
        if len(found) != 1:
            return set()
        anchor = next(iter(found))
    if anchor not in scene.nouns:
        return set()
    candidates = [o for o, n in scene.nouns.items() if o != anchor and (program.noun in (ANY, n))]
    relation = families[program.hop.relation].relation
    assert relation is not None
    return relation.select(candidates, anchor, scene)


@dataclass(frozen=True)
class Referral:
    """One episode's instruction: its words, family and program."""

    prompt: str
    family: str
    program: Program

    def facts(self) -> dict[str, str]:
        return {FAMILY_KEY: self.family, PROGRAM_KEY: str(self.program)}


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """A wording file (config/referring/<name>.yaml): families, templates, and each ontology's nouns."""

    families: Mapping[str, Family]
    instruction: str  # "pick up the {referent} and place it on the {place}"
    referent: str  # "{noun} that is {phrase} {anchor}"
    anchor: str  # "the {name}"
    nouns: Mapping[str, Mapping[str, str]]  # ontology name -> object -> noun
    source: str = "<data>"

    @property
    def one_hop(self) -> list[str]:
        return [f for f, fam in self.families.items() if fam.hops == 1]

    # -- words ------------------------------------------------------------------------------------------------

    def words(self, program: Program) -> str:
        """A referent's words: "black bowl that is left of the plate"."""
        anchor = program.hop.anchor
        name = self.words(anchor) if isinstance(anchor, Program) else self._name(anchor)
        return self.referent.format(noun=program.noun, phrase=self.families[program.hop.relation].phrase,
                                    anchor=self.anchor.format(name=name))

    def prompt(self, program: Program, place_noun: str) -> str:
        return self.instruction.format(referent=self.words(program), place=place_noun)

    def _name(self, obj: str) -> str:
        for nouns in self.nouns.values():
            if obj in nouns:
                return nouns[obj]
        raise ReferringError(f"{self.source}: no noun for object {obj!r}")

    def parse(self, instruction: str, ontology: str) -> tuple[Program, str] | None:
        """(program, place noun) of an instruction worded by this vocabulary for `ontology`'s objects; None for any
        other text (the wording round trip: ``parse(prompt(p, place)) == (p, place)``)."""
        nouns = self.nouns.get(ontology)
        if nouns is None:
            return None
        m = self._instruction_re.match(" ".join(instruction.lower().split()).rstrip("."))
        if not m:
            return None
        program = self._parse_referent(m.group("referent"), nouns, first=True)
        return (program, m.group("place")) if program is not None else None

    def _parse_referent(self, text: str, nouns: Mapping[str, str], first: bool) -> Program | None:
        for family, fam in self.families.items():
            if fam.hops != 1:
                continue
            m = self._referent_re(fam.phrase).match(text)
            if not m:
                continue
            noun = m.group("noun")
            if (noun == ANY) == first or (noun != ANY and noun not in nouns.values()):
                continue
            inner = m.group("anchor")
            named = [o for o, n in nouns.items() if n == inner]
            if len(named) == 1:
                return Program(noun, Hop(family, named[0]))
            nested = self._parse_referent(inner, nouns, first=False)
            if nested is not None:
                return Program(noun, Hop(family, nested))
        return None

    @property
    def _instruction_re(self) -> re.Pattern:
        pattern = re.escape(self.instruction).replace(re.escape("{referent}"), "(?P<referent>.+)")
        return re.compile("^" + pattern.replace(re.escape("{place}"), "(?P<place>[a-z ]+)") + "$")

    def _referent_re(self, phrase: str) -> re.Pattern:
        anchor = re.escape(self.anchor).replace(re.escape("{name}"), "(?P<anchor>.+)")
        pattern = (re.escape(self.referent).replace(re.escape("{noun}"), "(?P<noun>[a-z ]+?)")
                   .replace(re.escape("{phrase}"), re.escape(phrase)).replace(re.escape("{anchor}"), anchor))
        return re.compile("^" + pattern + "$")

    # -- generation -------------------------------------------------------------------------------------------

    def scene(self, ontology: str, objects: Iterable[str], graph: Graph,
              positions: Mapping[str, np.ndarray]) -> ReferringScene:
        """The referring scene of `objects` (those with a noun in `ontology`'s vocabulary)."""
        nouns = self.nouns.get(ontology)
        if nouns is None:
            raise ReferringError(f"{self.source}: no nouns for ontology {ontology!r}; it has {sorted(self.nouns)}")
        kept = {o: nouns[o] for o in objects if o in nouns}
        return ReferringScene(kept, graph, {o: np.asarray(positions[o], float) for o in kept if o in positions})

    def programs(self, scene: ReferringScene, target: str, family: str) -> list[Program]:
        """Every program of `family` that picks out exactly `target` in `scene`, in a fixed order."""
        fam = self.families[family]
        noun = scene.nouns.get(target)
        if noun is None:
            return []
        names = [o for o, n in scene.nouns.items() if list(scene.nouns.values()).count(n) == 1]
        if fam.hops == 1:
            options = [Program(noun, Hop(family, a)) for a in names if a != target]
        else:
            inner = [Program(ANY, Hop(f, a)) for f in self.one_hop for a in names]
            inner = [p for p in inner if select(p, scene, self.families) - {target}
                     and len(select(p, scene, self.families)) == 1]
            options = [Program(noun, Hop(f, p)) for f in self.one_hop for p in inner]
        return [p for p in options if select(p, scene, self.families) == {target}]

    def family_for(self, index: int, available: Sequence[str]) -> str | None:
        """The family of the episode at `index` (its place in the plan): the family at index mod their number, or,
        where the scene has no program of it, a seeded draw among those it has (see the module docstring)."""
        names = list(self.families)
        rotation = names[index % len(names)]
        if rotation in available:
            return rotation
        options = [f for f in names if f in available]
        return random.Random(f"sgvla referring family {index}").choice(options) if options else None

    def refer(self, scene: ReferringScene, target: str, place_noun: str, index: int, seed: int) -> Referral | None:
        """The instruction of one episode (see the module docstring), or None where no family picks `target` out."""
        pools = {f: self.programs(scene, target, f) for f in self.families}
        family = self.family_for(index, [f for f, p in pools.items() if p])
        if family is None:
            return None
        program = random.Random(f"sgvla referring {index} {seed}").choice(pools[family])
        return Referral(self.prompt(program, place_noun), family, program)


@dataclass(frozen=True, eq=False)
class ReferringSpec:
    """A perturbation set's ``referring:`` key: every task's instruction replaced, per episode, by a program of the
    vocabulary that picks out the task's target in the scene the reset made (see the module docstring)."""

    vocabulary: Vocabulary
    ontology: str  # the embodiment's ontology: which nouns name its objects
    name: str = "spatial"

    def instruct(self, scene: Any, view: str, goal: Sequence[str], task_id: int, seed: int, tasks: int) -> Referral:
        """The episode's referral from `scene` (a SceneState: the simulator's truth) and its `view`'s ground-truth
        graph; `tasks`: how many tasks the suite has (the episode's place in a plan is ``seed * tasks + task_id``)."""
        graph = ground_truth_views(scene, [view])[view].graph
        positions = dict(zip(scene.objects, np.asarray(scene.positions, float)))
        refer_scene = self.vocabulary.scene(self.ontology, graph.objects(), graph, positions)
        target, place = goal
        nouns = self.vocabulary.nouns[self.ontology]
        if place not in nouns:
            raise ReferringError(f"{self.vocabulary.source}: no noun for the place object {place!r}")
        referral = self.vocabulary.refer(refer_scene, target, nouns[place], seed * tasks + task_id, seed)
        if referral is None:
            raise ReferringError(f"task {task_id} seed {seed}: no program of {list(self.vocabulary.families)} picks "
                                 f"out {target!r} alone in view {view!r}")
        return referral

    def describe(self) -> str:
        return f"instruction: a spatially-referring program ({self.name}: {', '.join(self.vocabulary.families)})"


class ReferringBackend:
    """A suite's backend whose instruction is, each episode, the referral `spec` makes from the scene its reset
    placed (the task's own words before the first reset); everything else is the backend's own. Its records carry
    the family and the program (`record_facts`), in process, over topics (the sim bridge's reset facts) and in
    lerobot_env_sgvla alike, since all three build backends through the suite.

    `truth`: the simulator's scene (a perceiving backend's `scene()` is what it perceives; the instruction is the
    task's, made from the truth); `view`: the camera whose ground-truth graph the programs are checked on."""

    def __init__(self, inner: Any, spec: ReferringSpec, *, task_id: int, tasks: int, view: str,
                 truth: Any = None) -> None:
        self.inner, self.spec, self.task_id, self.tasks, self.view = inner, spec, int(task_id), int(tasks), view
        self.truth = truth or inner.scene
        self.referral: Referral | None = None

    def __getattr__(self, name: str) -> Any:  # only what this class does not define: the backend's own
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def task(self) -> str:
        return self.referral.prompt if self.referral is not None else self.inner.task

    def reset(self, seed: int) -> Any:
        self.referral = None
        observation = self.inner.reset(seed)
        goal = self.inner.episode_info()["goal"]
        self.referral = self.spec.instruct(self.truth(), self.view, goal, self.task_id, int(seed), self.tasks)
        return dataclasses.replace(observation, task=self.task)

    def step(self, action: np.ndarray) -> tuple[Any, bool, bool]:
        observation, success, done = self.inner.step(action)
        return dataclasses.replace(observation, task=self.task), success, done

    def record_facts(self) -> dict[str, Any]:
        facts = dict(self.inner.record_facts())
        facts["perturbation_applied"] = "; ".join(
            p for p in (self.spec.describe(), facts.get("perturbation_applied", "none")) if p != "none")
        return {**facts, **(self.referral.facts() if self.referral is not None else {})}

    def __enter__(self) -> ReferringBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.close()


def parse_referring(value: Any, ontology: str, fail: Any) -> ReferringSpec | None:
    """A set's ``referring:`` value (a vocabulary's name or path; absent: None); ``fail(where, msg)`` makes the
    error to raise, naming the set's file."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise fail("key 'referring'", f"names a vocabulary of config/referring/ (e.g. spatial), got {value!r}")
    try:
        vocabulary = load_vocabulary(value)
    except ReferringError as exc:
        raise fail("key 'referring'", str(exc)) from None
    if ontology not in vocabulary.nouns:
        raise fail("key 'referring'", f"vocabulary {value!r} has no nouns for ontology {ontology!r}")
    return ReferringSpec(vocabulary, ontology, Path(value).stem)


def load_vocabulary(name_or_path: str | Path = "spatial") -> Vocabulary:
    """``config/referring/<name>.yaml`` or an explicit path, checked: every error names the file and the key."""
    available = sorted(p.stem for p in REFERRING_DIR.glob("*.yaml"))
    try:
        data, path = read_set(name_or_path, REFERRING_DIR, available, "referring vocabulary")
    except (OSError, ValueError) as exc:
        raise ReferringError(str(exc)) from None
    return parse_vocabulary(data, str(path))


_VOCAB_KEYS = {"families", "instruction", "referent", "anchor", "nouns"}


def parse_vocabulary(data: Any, source: str = "<data>") -> Vocabulary:
    def fail(where: str, msg: str) -> ReferringError:
        return ReferringError(f"{source}: {where}: {msg}")

    if not isinstance(data, dict):
        raise fail("top level", "must be a mapping")
    unknown = sorted(set(data) - _VOCAB_KEYS)
    if unknown:
        raise fail(f"key {unknown[0]!r}", f"unknown key; allowed: {sorted(_VOCAB_KEYS)}")
    templates = {}
    for key, fields in (("instruction", ("{referent}", "{place}")), ("referent", ("{noun}", "{phrase}", "{anchor}")),
                        ("anchor", ("{name}",))):
        text = data.get(key)
        if not isinstance(text, str) or any(f not in text for f in fields):
            raise fail(f"key {key!r}", f"must be a text holding {', '.join(fields)}")
        templates[key] = text
    families: dict[str, Family] = {}
    raw = data.get("families")
    if not isinstance(raw, dict) or not raw:
        raise fail("key 'families'", "must map family names to {phrase, relation} or {hops: 2}")
    for name, entry in raw.items():
        where = f"family {name!r}"
        if not isinstance(entry, dict):
            raise fail(where, "must be a mapping")
        if entry.get("hops", 1) == 2 and set(entry) == {"hops"}:
            families[str(name)] = Family(str(name), hops=2)
            continue
        if set(entry) != {"phrase", "relation"} or not isinstance(entry["phrase"], str):
            raise fail(where, f"a one-hop family has 'phrase' and 'relation'; a two-hop one 'hops: 2'; got {entry!r}")
        spec = entry["relation"]
        spec = {"type": spec} if isinstance(spec, str) else spec
        if not isinstance(spec, dict) or "type" not in spec:
            raise fail(where, "'relation' is a registered relation's name or a mapping with 'type' and its options")
        try:
            cls = ReferringRelation.choice(spec["type"])
            relation = cls(**{k: v for k, v in spec.items() if k != "type"})
        except (ValueError, TypeError) as exc:
            raise fail(where, str(exc)) from None
        families[str(name)] = Family(str(name), entry["phrase"].strip(), relation)
    if not any(f.hops == 1 for f in families.values()):
        raise fail("key 'families'", "needs at least one one-hop family")
    nouns = data.get("nouns")
    if not isinstance(nouns, dict) or not all(isinstance(v, dict) for v in nouns.values()):
        raise fail("key 'nouns'", "must map ontology names to {object: noun}")
    return Vocabulary(families, templates["instruction"], templates["referent"], templates["anchor"],
                      {str(k): {str(o): str(n) for o, n in v.items()} for k, v in nouns.items()}, source)


__all__ = ["ANY", "FAMILY_KEY", "PROGRAM_KEY", "Family", "Hop", "Program", "Referral", "ReferringError",
           "ReferringBackend", "ReferringRelation", "ReferringScene", "ReferringSpec", "parse_referring", "Vocabulary", "load_vocabulary", "parse_vocabulary", "select"]
