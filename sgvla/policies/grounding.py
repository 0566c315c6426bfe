"""Resolve which of several look-alike objects a prompt (and an injected scene graph) refers to.

The prompt-grounded policy sees unlabeled positions of the candidates (the two black bowls look
alike) and labeled positions of distinct-looking landmarks (plate, ramekin, cookie box, ...). It
must pick the candidate that the instruction means. Two sources of evidence:

* a scene graph in the prompt: triplets about the target (`target_akita_black_bowl`); each
  candidate is scored by how many of them its position satisfies under the same world-frame rule
  the ground truth uses (dominant axis; dx > 0 in front, dy > 0 left); stacking and containment
  are read off the objects' bounding boxes when the policy perceives them (one resting on the
  other's top, or inside it: the bowl in the cabinet's drawer), else off horizontal proximity;
* the referring expression of the instruction ("the black bowl between the plate and the
  ramekin", "... next to the cookie box", "... on the stove", "... from table center", ...).

* a spatially-referring program (`sgvla.core.referring`, worded "the black bowl that is left of the object
  that is in front of the plate"): read back from its words with the vocabulary, and evaluated on the injected
  graph, never on what the policy perceives (below).

The graph, when present and discriminative, wins; otherwise the expression decides.

A referring program is resolved from the graph or not at all. With a graph in the prompt (scene_graph and the
arms that show one), the program's hops are evaluated on the injected triplets (a hop holds where a triplet, or its
inverse, states it; nearest/farthest by the perceived positions of the graph's nodes, the target's node placed on
the candidate its triplets fit, as above); it resolves when it picks out the graph's target alone. Without one
(standard, filler) the policy knows the noun ("black bowl") and nothing of the relations, so it guesses among the
candidates that match it, as `tie_break` says. The wording rules above stay for the suites' own phrases (what a
policy trained on them knows); a program is not one of them, so a relation the prompt states only as a program
reaches the policy only through the graph. With the paper's subject-filtered graph a two-hop program whose inner hop
relates two landmarks cannot be evaluated (the graph holds the target's triplets only): the policy guesses. When neither
tells the candidates apart, the choice is a tie: `tie_break="random"` (the default) draws among them
with the episode's seeded generator, so a policy told nothing succeeds at chance, as a real policy
with no information would; `"first"` takes the first candidate in position order (a fixed positional
rule: its success is 0% or 100% per layout, not chance). Which source decided, and why, is returned
so every episode record can say how its target was chosen.
"""

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from sgvla.core.referring import Program, Vocabulary, select
from sgvla.scene_graph.ontology import Ontology
from sgvla.scene_graph.parse import parse_triplets
from sgvla.scene_graph.relations import RelationParams, is_drawer_task
from sgvla.scene_graph.serialize import CONTEXT_HEADER
from sgvla.scene_graph.triplet import Graph

STACK_RADIUS = 0.06  # metres: horizontal distance under which two objects count as stacked
TIE_BREAKS = ("random", "first")  # how a tie among equally plausible candidates is broken


@dataclass(frozen=True)
class PerceivedScene:
    """What the policy perceives: candidates without identity, landmarks with names."""

    candidates: np.ndarray  # (K, 3) world positions of the look-alike objects
    landmarks: Mapping[str, np.ndarray]  # ontology name -> (3,) world position
    table_center: np.ndarray  # (3,) centre of the workspace
    # Bounding boxes (centre, half size), stacked (2, 3), where perceived: candidates (K, 2, 3), landmarks by name.
    candidate_boxes: np.ndarray | None = None
    landmark_boxes: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class Grounding:
    index: int  # chosen candidate
    source: str  # "scene_graph" | "prompt" | "fallback"
    evidence: str
    scores: tuple[float, ...] = field(default=())


def stacked_relation(a_box: np.ndarray, b_box: np.ndarray, contain: bool) -> str | None:
    """a's vertical relation to b from their boxes (centre, half size), or None if neither rests on or holds the other.

    On top: a's centre within b's footprint, above b's top, and a's bottom above b's centre (a box
    beside a tall one is not on it). Inside (containment pairs only): the smaller one's centre within
    the other's box.
    """
    (ac, ah), (bc, bh) = np.asarray(a_box, float), np.asarray(b_box, float)
    if np.any(np.abs(ac[:2] - bc[:2]) > np.maximum(ah[:2], bh[:2])):
        return None
    if ac[2] > bc[2] + bh[2] and ac[2] - ah[2] >= bc[2]:
        return "is_on_top_of"
    if bc[2] > ac[2] + ah[2] and bc[2] - bh[2] >= ac[2]:
        return "is_below_of"
    if contain and np.all(np.abs(ac - bc) <= np.maximum(ah, bh)):
        return "is_inside" if np.prod(ah) <= np.prod(bh) else "contains"
    return None


def perceived_relation(a: np.ndarray, b: np.ndarray, a_name: str, b_name: str, drawer: bool,
                       params: RelationParams = RelationParams(), boxes: tuple[np.ndarray, np.ndarray] | None = None) -> str:
    """The relation a policy would read off positions (and boxes, when perceived) for the ordered pair (a, b)."""
    contain_pair = drawer and {a_name, b_name} == set(params.drawer_pair)
    if boxes is not None:
        stacked = stacked_relation(*boxes, contain_pair)
        if stacked is not None:
            return stacked
    d = np.asarray(a, float) - np.asarray(b, float)
    if np.hypot(d[0], d[1]) < STACK_RADIUS:
        if d[2] >= 0:
            return "is_inside" if contain_pair else "is_on_top_of"
        return "contains" if contain_pair else "is_below_of"
    if abs(d[0]) >= abs(d[1]):
        return "is_in_front_of" if d[0] > 0 else "is_behind"
    return "is_left_of" if d[1] > 0 else "is_right_of"


def split_prompt(prompt: str) -> tuple[str, str]:
    """(instruction, context block); the context is empty for a standard prompt."""
    head, sep, tail = prompt.partition(CONTEXT_HEADER)
    return head.strip(), (sep + tail) if sep else ""


def ground_with_graph(context: str, scene: PerceivedScene, ontology: Ontology, task: str) -> Grounding | None:
    target = ontology.manipulated
    drawer = is_drawer_task(task, RelationParams())
    facts = [(t, other) for t in parse_triplets(context, ontology).triplets
             for other in ([t.object] if t.subject == target else [t.subject] if t.object == target else [])
             if other in scene.landmarks]
    if not facts:
        return None
    scores = []
    for k, cand in enumerate(scene.candidates):
        agree = 0
        for t, other in facts:
            pos = scene.landmarks[other]
            boxes = None
            if scene.candidate_boxes is not None and other in scene.landmark_boxes:
                boxes = (scene.candidate_boxes[k], scene.landmark_boxes[other])
            if t.subject == target:
                agree += perceived_relation(cand, pos, target, other, drawer, boxes=boxes) == t.relation
            else:
                agree += perceived_relation(pos, cand, other, target, drawer,
                                            boxes=boxes[::-1] if boxes else None) == t.relation
        scores.append(agree / len(facts))
    best = int(np.argmax(scores))
    if len(scores) > 1 and sorted(scores)[-1] == sorted(scores)[-2]:
        return None  # the graph does not tell the candidates apart
    return Grounding(best, "scene_graph", f"{scores[best] * len(facts):.0f}/{len(facts)} graph triplets agree",
                     tuple(scores))


_REFERENT = re.compile(r"black bowl (?P<expr>.+?)(?: and (?:place|put) it\b|$)")
_NAMED = r"(?:the )?(?P<{}>[a-z ]+?)"


def _expression_rules(ontology: Ontology) -> list[tuple[re.Pattern, str]]:
    n = lambda g: _NAMED.format(g)  # noqa: E731
    return [
        (re.compile(rf"^between {n('a')} and {n('b')}$"), "between"),
        (re.compile(rf"^(?:next to|beside|near) {n('a')}$"), "next_to"),
        (re.compile(rf"^(?:in front of) {n('a')}$"), "is_in_front_of"),
        (re.compile(rf"^(?:behind|in back of) {n('a')}$"), "is_behind"),
        (re.compile(rf"^(?:to the )?left of {n('a')}$"), "is_left_of"),
        (re.compile(rf"^(?:to the )?right of {n('a')}$"), "is_right_of"),
        (re.compile(rf"^(?:in the (?:top |bottom |middle )?drawer of|inside|in) {n('a')}$"), "inside"),
        (re.compile(rf"^(?:on top of|on) {n('a')}$"), "is_on_top_of"),
        (re.compile(r"^(?:from|at|in|on) (?:the )?(?:table center|center of the table|middle of the table)$"),
         "table_center"),
    ]


def _landmark(words: str, ontology: Ontology, scene: PerceivedScene) -> str | None:
    name = ontology.resolve(words.strip())
    return name if name in scene.landmarks else None


def ground_with_prompt(instruction: str, scene: PerceivedScene, ontology: Ontology) -> Grounding | None:
    match = _REFERENT.search(instruction.lower().strip().rstrip("."))
    if not match:
        return None
    expr = match.group("expr").strip()
    xy = scene.candidates[:, :2]
    for pattern, kind in _expression_rules(ontology):
        m = pattern.match(expr)
        if not m:
            continue
        names = {g: _landmark(v, ontology, scene) for g, v in m.groupdict().items()}
        if None in names.values():
            return None
        pos = {g: np.asarray(scene.landmarks[v], float) for g, v in names.items()}
        if kind == "between":
            cost = np.linalg.norm(xy - (pos["a"][:2] + pos["b"][:2]) / 2, axis=1)
        elif kind == "table_center":
            cost = np.linalg.norm(xy - np.asarray(scene.table_center, float)[:2], axis=1)
        elif kind in ("next_to", "inside"):
            cost = np.linalg.norm((scene.candidates - pos["a"]) if kind == "inside" else xy - pos["a"][:2], axis=1)
        else:
            rel = [perceived_relation(c, pos["a"], "", "", False) for c in scene.candidates]
            dist = np.linalg.norm(xy - pos["a"][:2], axis=1)
            cost = np.where(np.array(rel) == kind, dist, np.inf)
        if not np.isfinite(cost).any():
            return None
        best = int(np.argmin(cost))
        return Grounding(best, "prompt", f"'{expr}' ({kind})", tuple(float(c) for c in cost))
    return None


def ground_program(program: Program, context: str, scene: PerceivedScene, ontology: Ontology, task: str,
                   vocabulary: Vocabulary) -> Grounding | None:
    """The candidate a referring program means, evaluated on the injected graph (module docstring); None when the
    prompt has no graph or the program does not pick out the graph's target alone."""
    if not context:
        return None
    target = ground_with_graph(context, scene, ontology, task)  # the target node's candidate, by its triplets
    graph = Graph(parse_triplets(context, ontology).triplets)
    positions = dict(scene.landmarks)
    if target is not None:
        positions[ontology.manipulated] = scene.candidates[target.index]
    nodes = set(graph.objects()) | set(scene.landmarks)
    picked = select(program, vocabulary.scene(ontology.name, nodes, graph, positions), vocabulary.families)
    if target is None or picked != {ontology.manipulated}:
        return None
    return Grounding(target.index, "scene_graph", f"program {program} picks the graph's target; {target.evidence}",
                     target.scores)


def _tie(scene: PerceivedScene, tie_break: str, rng: random.Random | None, why: str) -> Grounding:
    k = len(scene.candidates)
    if tie_break == "first" or k == 1:
        return Grounding(0, "fallback", f"{why}; first candidate")
    if rng is None:
        raise ValueError("tie_break='random' needs the episode's seeded generator (rng)")
    return Grounding(rng.randrange(k), "fallback", f"{why}; seeded random choice among {k} candidates")


def ground_target(prompt: str, scene: PerceivedScene, ontology: Ontology, task: str | None = None,
                  tie_break: str = "random", rng: random.Random | None = None,
                  vocabulary: Vocabulary | None = None) -> Grounding:
    """Pick the candidate the prompt means: a referring program (with `vocabulary`) on the graph, else graph
    evidence first, then the instruction's wording, else a tie broken by `tie_break` (`random` draws with `rng`,
    which the caller seeds per episode; see the module docstring)."""
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
    if len(scene.candidates) == 0:
        raise ValueError("no candidate objects to ground the instruction on")
    instruction, context = split_prompt(prompt)
    parsed = vocabulary.parse(instruction, ontology.name) if vocabulary is not None else None
    if parsed is not None:
        program = parsed[0]
        found = ground_program(program, context, scene, ontology, task or instruction, vocabulary)  # type: ignore[arg-type]
        if found is not None:
            return found
        why = "the graph does not pick out its target" if context else "no scene graph to evaluate it on"
        return _tie(scene, tie_break, rng, f"program {program}: {why}")
    if context:
        by_graph = ground_with_graph(context, scene, ontology, task or instruction)
        if by_graph is not None:
            return by_graph
    by_prompt = ground_with_prompt(instruction, scene, ontology)
    if by_prompt is not None:
        return by_prompt
    return _tie(scene, tie_break, rng, "instruction names no resolvable referent")
