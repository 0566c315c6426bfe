"""Control arms: prompts shaped like the scene-graph context that lack (or contradict) its facts.

Why: a policy that does better with the graph in its prompt may owe it to the graph's facts, or merely to a longer
prompt, or to the words it contains. Each control keeps one of those and removes the facts, so the report can tell
them apart (`scene_graph` against each control, McNemar with Holm's correction):

* ``filler``: neutral words, as many tokens as the ``scene_graph`` block of the same step (the policy's tokenizer,
  words when it has none), under the same header; no object, relation or spatial word;
* ``wrong_graph``: a fluent graph of the same ontology whose every triplet is false for the scene: the target's
  identity moved to its look-alike (the other bowl), true triplets dropped;
* ``shuffled_graph``: the ``scene_graph`` block's own words, the object names permuted within their class (an
  interchangeable group; every ungrouped object is a "landmark"), chosen to leave as few true triplets as possible.
* ``frozen_graph``: the ``scene_graph`` block of the episode's first step, never updated: true when the episode
  starts, stale once the scene changes (a mid-episode perturbation, `sgvla.core.mid_episode`). Live against frozen
  asks whether a policy follows the graph as the scene changes; without a change the two prompts are the same.

Every control is seeded by the episode's seed, reads the live view graph (``uses_graph``) and says in
``Context.control`` what it showed (the record's ``control_<key>`` fields, from the first step).
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import permutations, product
from typing import Any, ClassVar, NamedTuple

from sgvla.core.context import Context, ContextInputs, ContextMode, SceneGraphMode
from sgvla.scene_graph import Graph, Ontology, ViewGraph, compose_prompt, format_prompt_context
from sgvla.scene_graph.ontology import RELATIONS, display_name, words_of
from sgvla.scene_graph.serialize import CONTEXT_HEADER, MANIPULATED


class Shown(NamedTuple):
    """What a control puts in the prompt: the block, the triplets it shows, and its record (`Context.control`)."""

    text: str
    triplets: int
    control: dict[str, Any]


@dataclass
class ControlMode(ContextMode):
    """A control: builds its block from the live graph and the episode's inputs (seed, token counter)."""

    uses_graph: ClassVar[bool] = True
    control: ClassVar[bool] = True

    def shown(self, view_graph: ViewGraph, view: str, ontology: Ontology, style: str,
              inputs: ContextInputs) -> Shown:
        raise NotImplementedError

    def block(self, view_graph: ViewGraph, view: str, ontology: Ontology, style: str) -> tuple[str, int]:
        shown = self.shown(view_graph, view, ontology, style, ContextInputs())
        return shown.text, shown.triplets

    def context(self, task: str, view_graph: ViewGraph | None, view: str, ontology: Ontology,
                style: str = "reference", inputs: ContextInputs = ContextInputs()) -> Context:
        if view_graph is None:
            raise ValueError(f"context mode {self.type!r} needs a graph of view {view!r}")
        shown = self.shown(view_graph, view, ontology, style, inputs)
        return Context(compose_prompt(task, shown.text), view_graph.graph, shown.triplets, shown.control)


def scene_graph_block(view_graph: ViewGraph, view: str, ontology: Ontology, style: str) -> tuple[str, int]:
    """The ``scene_graph`` mode's block of this view graph: what every control is shaped after."""
    return SceneGraphMode().block(view_graph, view, ontology, style)


# -- filler --------------------------------------------------------------------------------------------------------

# Common English words that are one token in the usual VLA tokenizers and say nothing about a scene.
NEUTRAL_WORDS = (
    "the", "and", "that", "with", "have", "this", "will", "your", "they", "know", "want", "been", "good",
    "much", "some", "time", "very", "when", "come", "just", "like", "make", "many", "more", "only", "such", "take",
    "than", "them", "were", "what", "which", "would", "could", "other", "their", "these", "think", "people",
    "because", "should", "also", "even", "most", "year", "work", "said", "each", "those", "while", "might", "often",
    "never", "always", "maybe", "today", "story", "music", "idea", "reason", "friend", "money", "family", "question",
    "history", "simple", "happy", "again", "thing", "thanks", "really", "great", "life", "world",
)
# Words that place or relate things; none may appear in a filler (nor any relation's or object's word).
SPATIAL_WORDS = frozenset(
    "left right front behind back top bottom above below under over on in inside outside into onto near far next "
    "beside between center centre middle side edge corner up down around across along through toward towards here "
    "there where upper lower high low close away before after forward ahead beyond within against of at by off "
    "contains contain is to from".split()
)
_RELATION_WORDS = frozenset(w for r in RELATIONS for w in words_of(r))
_PAD_TRIES = 16  # words tried to close a gap of 2+ tokens that a whole stream word would overshoot


def neutral_words(ontology: Ontology) -> tuple[str, ...]:
    """The neutral words less any word of the ontology's names (objects, display names, aliases, ambiguous names)."""
    names = [*ontology.objects, *map(display_name, ontology.objects), *ontology.aliases, *ontology.ambiguous]
    banned = SPATIAL_WORDS | _RELATION_WORDS | {w for n in names for w in words_of(n)}
    return tuple(w for w in NEUTRAL_WORDS if w not in banned)


def filler_words(seed: int, n: int, words: tuple[str, ...]) -> list[str]:
    """The first `n` words of the seed's stream: a longer filler extends a shorter one of the same seed."""
    rng = random.Random(f"sgvla-filler:{seed}")
    return [rng.choice(words) for _ in range(n)]


def filler_block(body: list[str]) -> str:
    return "\n".join([CONTEXT_HEADER, " ".join(body)]) if body else CONTEXT_HEADER


def fit_words(count_n: Callable[[int], int], target: int, max_steps: int = 64) -> int:
    """The largest n with count_n(n) <= target (count_n nondecreasing): a bracket narrowed by interpolation,
    starting from one token a word, so a tokenizer whose words are one token each needs one or two counts."""
    lo, c_lo = 0, count_n(0)
    if c_lo >= target:
        return 0
    hi = c_hi = None
    for step in range(max_steps):
        if hi is None:
            n = lo + max(target - c_lo, 1)
        elif hi - lo <= 1:
            break
        else:
            n = (lo + hi) // 2 if step % 2 and step > 4 else lo + round((target - c_lo) * (hi - lo) / (c_hi - c_lo))
            n = min(max(n, lo + 1), hi - 1)
        c = count_n(n)
        if c == target:
            return n
        if c < target:
            lo, c_lo = n, c
        else:
            hi, c_hi = n, c
    return lo


@ContextMode.register("filler")
@dataclass
class Filler(ControlMode):
    """Neutral text as long as the scene-graph block (the task plus words, no fact): does length alone help?"""

    label: ClassVar[str] = "filler"

    def shown(self, view_graph: ViewGraph, view: str, ontology: Ontology, style: str,
              inputs: ContextInputs) -> Shown:
        graph_text, _ = scene_graph_block(view_graph, view, ontology, style)
        target = inputs.tokens(graph_text)
        words = neutral_words(ontology)
        if not words:
            raise ValueError(f"context mode 'filler': every neutral word names something in ontology {ontology.name!r}")

        def count_n(n: int) -> int:
            return inputs.tokens(filler_block(filler_words(inputs.seed, n, words)))

        n = fit_words(count_n, target)
        body = filler_words(inputs.seed, n, words)
        text, tokens = filler_block(body), inputs.tokens(filler_block(body))
        pads = list(words)
        random.Random(f"sgvla-filler-pad:{inputs.seed}").shuffle(pads)
        for word in pads[:_PAD_TRIES]:  # a gap of 2+ tokens: the next stream word costs 3+; close it with others
            if target - tokens < 2:
                break
            longer = filler_block([*body, word])
            c = inputs.tokens(longer)
            if tokens < c <= target + 1:
                body, text, tokens = [*body, word], longer, c
        return Shown(text, 0, {"kind": "filler", "tokens": tokens, "matched_tokens": target,
                               "counter": inputs.counted_by(graph_text)})


# -- wrong_graph ---------------------------------------------------------------------------------------------------

def look_alike(ontology: Ontology, graph: Graph, mode: str) -> str:
    """The target's look-alike (its interchangeable group's other member; one this graph relates, if any)."""
    target = ontology.manipulated
    group = next((g for g in ontology.interchangeable if target in g), None)
    if group is None:
        raise ValueError(f"context mode {mode!r} needs a look-alike of the target {target!r}, but ontology "
                         f"{ontology.name!r} has no interchangeable group with it")
    others = [o for o in group if o != target]
    subjects = {t.subject for t in graph}
    return next((o for o in others if o in subjects), others[0])


@ContextMode.register("wrong_graph")
@dataclass
class WrongGraph(ControlMode):
    """A well-formed graph, every triplet false: the target's triplets are its look-alike's. Do facts matter?"""

    label: ClassVar[str] = "wrong"

    def shown(self, view_graph: ViewGraph, view: str, ontology: Ontology, style: str,
              inputs: ContextInputs) -> Shown:
        target, graph = ontology.manipulated, view_graph.graph
        other = look_alike(ontology, graph, self.type)
        moved = graph.rename({target: other, other: target}).filter_subject(target)
        truth = set(graph)
        false = Graph(tuple(t for t in moved if t not in truth))
        text = format_prompt_context(false, view, ontology, subject_filter=MANIPULATED, style=style)
        return Shown(text, len(false), {"kind": "wrong_graph", "swapped": f"{target}<->{other}", "shown": len(false),
                                        "dropped_true": len(moved) - len(false)})


# -- shuffled_graph ------------------------------------------------------------------------------------------------

MAX_PERMUTATIONS = 720  # enumerated up to this many (6 landmarks); seeded samples of that many beyond


def name_classes(names: list[str], ontology: Ontology) -> list[list[str]]:
    """`names` by class: each interchangeable group is a class, every ungrouped object one "landmark" class."""
    group_of = {o: i for i, g in enumerate(ontology.interchangeable) for o in g}
    classes: dict[int, list[str]] = {}
    for name in sorted(names):
        classes.setdefault(group_of.get(name, -1), []).append(name)
    return [c for _, c in sorted(classes.items())]


def class_permutations(classes: list[list[str]], rng: random.Random) -> Iterator[dict[str, str]]:
    """Class-preserving renamings (identity first): all of them, or seeded samples when there are too many."""
    total = math.prod(math.factorial(len(c)) for c in classes)
    if total <= MAX_PERMUTATIONS:
        for combo in product(*(permutations(c) for c in classes)):
            yield {a: b for c, p in zip(classes, combo) for a, b in zip(c, p)}
        return
    yield {a: a for c in classes for a in c}
    for _ in range(MAX_PERMUTATIONS - 1):
        yield {a: b for c in classes for a, b in zip(c, rng.sample(c, len(c)))}


def _words(text: str) -> Counter:
    return Counter(re.findall(r"\w+", text))


@lru_cache(maxsize=256)
def _shuffled(graph: Graph, view: str, ontology: Ontology, style: str, seed: int) -> Shown:
    target = ontology.manipulated
    shown = graph.filter_subject(target)
    original = format_prompt_context(shown, view, ontology, subject_filter=MANIPULATED, style=style)
    names = sorted({t.object for t in shown} - {target})
    rng = random.Random(f"sgvla-shuffled:{seed}")
    truth = set(graph)
    scored = []
    for mapping in class_permutations(name_classes(names, ontology), rng):
        permuted = shown.rename(mapping)
        scored.append((sum(t in truth for t in permuted), mapping, permuted))
    moved = [s for s in scored if any(a != b for a, b in s[1].items())] or scored
    best = min(s[0] for s in moved)
    candidates = [s for s in moved if s[0] == best]
    rng.shuffle(candidates)
    for still_true, mapping, permuted in [*candidates, *sorted(moved, key=lambda s: s[0]), scored[0]]:
        text = format_prompt_context(permuted, view, ontology, subject_filter=MANIPULATED, style=style)
        if _words(text) == _words(original):  # names sharing a display name could merge lines: keep the words
            listed = ", ".join(f"{display_name(a)}->{display_name(b)}" for a, b in sorted(mapping.items()) if a != b)
            return Shown(text, len(permuted), {"kind": "shuffled_graph", "permutation": listed or "identity",
                                               "still_true": still_true})
    raise AssertionError("the identity keeps the block's words")  # unreachable: scored[0] is the identity


@ContextMode.register("shuffled_graph")
@dataclass
class ShuffledGraph(ControlMode):
    """The graph block's own words with names permuted within their class: do the words or their facts help?"""

    label: ClassVar[str] = "shuf"

    def shown(self, view_graph: ViewGraph, view: str, ontology: Ontology, style: str,
              inputs: ContextInputs) -> Shown:
        shown = _shuffled(view_graph.graph, view, ontology, style, inputs.seed)  # cached: the graph rarely changes
        return Shown(shown.text, shown.triplets, dict(shown.control))


# -- frozen_graph --------------------------------------------------------------------------------------------------

@ContextMode.register("frozen_graph")
@dataclass
class FrozenGraph(SceneGraphMode):
    """The ``scene_graph`` block of the episode's first step at every step: can a policy follow a change without
    a live graph? State per episode (the first view graph), dropped by `reset` (`Episode.start` calls it)."""

    control: ClassVar[bool] = True
    label: ClassVar[str] = "frozen"
    first: ViewGraph | None = field(default=None, init=False, repr=False, compare=False)

    def reset(self) -> None:
        self.first = None

    def context(self, task: str, view_graph: ViewGraph | None, view: str, ontology: Ontology,
                style: str = "reference", inputs: ContextInputs = ContextInputs()) -> Context:
        if self.first is None:
            self.first = view_graph
        context = super().context(task, self.first, view, ontology, style, inputs)
        return Context(context.prompt, context.graph, context.triplets_in_prompt, {"kind": "frozen_graph"})


__all__ = ["ControlMode", "Filler", "FrozenGraph", "Shown", "ShuffledGraph", "WrongGraph"]
