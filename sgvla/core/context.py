"""Context modes: what an episode's prompt says besides the task (nothing, the live scene graph, boxes, both).

Each mode is a registered :class:`ContextMode` (the paper's five below); a plan names modes by their registered
names (``modes: [standard, scene_graph]``), and the name is part of every episode's key and record. A new mode is
one class: register it and say how it builds the context block from the view's live graph::

    @ContextMode.register("nearest_only")
    @dataclass
    class NearestOnly(ContextMode):
        uses_graph = True
        def block(self, view_graph, view, ontology, style): ...

Prompts are written with the scene-graph core's serializer, so the text is the same wherever sgvla composes
prompts (the episode engine, in process and in the ROS policy node).

The control arms (``filler``, ``wrong_graph``, ``shuffled_graph``: the graph's shape without its facts;
``frozen_graph``: the first step's graph, never updated) live in
:mod:`sgvla.core.controls` and are registered with this module (imported at its end). They need the episode's
``ContextInputs`` (seed, the policy's token counter), so they override :meth:`ContextMode.context`; the modes above
read only the graph and ignore them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sgvla.core.registry import Choice
from sgvla.scene_graph import Graph, Ontology, ViewGraph, compose_prompt, format_prompt_context
from sgvla.scene_graph.serialize import MANIPULATED, STYLES


@dataclass(frozen=True)
class Context:
    prompt: str
    graph: Graph | None  # the graph the prompt was built from (unfiltered), if any
    triplets_in_prompt: int
    # What a control mode did (which control, what it showed); stored flat as `control_<key>` in the record.
    control: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ContextInputs:
    """What a mode may draw on besides the view's graph: the episode's seed (controls are seeded) and the policy's
    token counter (it, or the counter itself, gives None when the policy has no tokenizer: words are counted)."""

    seed: int = 0
    count_tokens: Callable[[str], int | None] | None = None

    def tokens(self, text: str) -> int:
        n = self.count_tokens(text) if self.count_tokens is not None else None
        return len(text.split()) if n is None else n

    def counted_by(self, text: str) -> str:
        """How `tokens(text)` counts: "tokenizer" (the policy's) or "words"."""
        return "words" if self.count_tokens is None or self.count_tokens(text) is None else "tokenizer"


@dataclass
class ContextMode(Choice, kind="context mode"):
    """A context mode; subclasses say whether they read the live graph and how they write the block."""

    uses_graph: ClassVar[bool] = False  # needs the view's live graph (and boxes) every step
    needs_boxes: ClassVar[bool] = False  # reads boxes, which not every graph source gives
    baseline: ClassVar[bool] = False  # the mode the others are compared with (one registered mode is)
    label: ClassVar[str] = ""  # short name in report columns and plots ("" = the registered name)
    control: ClassVar[bool] = False  # the graph's shape without its facts (reports compare scene_graph with it)

    def block(self, view_graph: ViewGraph, view: str, ontology: Ontology, style: str) -> tuple[str, int]:
        """(context block, triplets shown) for the view's graph; only called when `uses_graph`."""
        raise NotImplementedError

    def reset(self) -> None:
        """An episode begins (`Episode.start`): a mode that keeps state across steps (``frozen_graph``) drops it."""

    def context(self, task: str, view_graph: ViewGraph | None, view: str, ontology: Ontology,
                style: str = "reference", inputs: ContextInputs = ContextInputs()) -> Context:
        if not self.uses_graph:
            return Context(task, None, 0)
        if view_graph is None:
            raise ValueError(f"context mode {self.type!r} needs a graph of view {view!r}")
        text, shown = self.block(view_graph, view, ontology, style)
        return Context(compose_prompt(task, text), view_graph.graph, shown)


@dataclass
class SerializedContext(ContextMode):
    """The paper's modes: the graph (filtered to the manipulated object's triplets, or whole) and/or the boxes."""

    uses_graph: ClassVar[bool] = True
    graph_part: ClassVar[bool] = True
    subject_filtered: ClassVar[bool] = True

    def block(self, view_graph: ViewGraph, view: str, ontology: Ontology, style: str) -> tuple[str, int]:
        graph = view_graph.graph if self.graph_part else None
        boxes = dict(view_graph.boxes) if self.needs_boxes else None
        text = format_prompt_context(graph, view, ontology, subject_filter=MANIPULATED if self.subject_filtered
                                     else None, style=style, boxes=boxes)
        shown = 0 if graph is None else len(graph.filter_subject(ontology.manipulated) if self.subject_filtered
                                            else graph)
        return text, shown


@ContextMode.register("standard")
@dataclass
class Standard(ContextMode):
    """The task alone, as the policy was trained."""

    baseline: ClassVar[bool] = True
    label: ClassVar[str] = "std"


@ContextMode.register("scene_graph")
@dataclass
class SceneGraphMode(SerializedContext):
    """The manipulated object's triplets (the paper's graph-injected mode)."""

    label: ClassVar[str] = "sg"


@ContextMode.register("scene_graph_full")
@dataclass
class FullSceneGraph(SerializedContext):
    """Every triplet of the view."""

    subject_filtered: ClassVar[bool] = False
    label: ClassVar[str] = "sg-full"


@ContextMode.register("bounding_boxes")
@dataclass
class BoundingBoxes(SerializedContext):
    """Every visible object's box, no graph."""

    graph_part: ClassVar[bool] = False
    needs_boxes: ClassVar[bool] = True
    label: ClassVar[str] = "bb"


@ContextMode.register("scene_graph_bounding_boxes")
@dataclass
class SceneGraphAndBoxes(SerializedContext):
    """The manipulated object's triplets and every box."""

    needs_boxes: ClassVar[bool] = True
    label: ClassVar[str] = "sg+bb"


def context_mode(name: str) -> ContextMode:
    return ContextMode.choice(name)()

__all__ = ["STYLES", "Context", "ContextInputs", "ContextMode", "context_mode"]
