"""Prompts per context mode: the task string, plus a scene-graph and/or bounding-box block.

The graph comes from a `GraphSource` (ground truth from the simulator now; a VLM later), is
recomputed every control step (a live graph), and is written with the scene-graph core's
serializer so the text is the same everywhere sgvla composes prompts (loop, ROS policy node).
"""

from dataclasses import dataclass
from typing import Protocol

from sgvla.scene_graph import Graph, Ontology, ViewGraph, compose_prompt, format_prompt_context
from sgvla.scene_graph.serialize import MANIPULATED

# mode -> (uses the graph, subject-filtered, adds boxes)
MODE_PARTS = {
    "standard": (False, False, False),
    "scene_graph": (True, True, False),
    "scene_graph_full": (True, False, False),
    "bounding_boxes": (False, False, True),
    "scene_graph_bounding_boxes": (True, True, True),
}


class GraphSource(Protocol):
    def view_graph(self, view: str) -> ViewGraph:
        """Graph and boxes of `view` for the current instant."""


@dataclass(frozen=True)
class Context:
    prompt: str
    graph: Graph | None  # the graph the prompt was built from (unfiltered), if any
    triplets_in_prompt: int


def needs_context(mode: str) -> bool:
    uses_graph, _, boxes = MODE_PARTS[mode]
    return uses_graph or boxes


def build_context(mode: str, task: str, view_graph: ViewGraph | None, view: str, ontology: Ontology,
                  style: str = "reference") -> Context:
    if mode not in MODE_PARTS:
        raise ValueError(f"unknown mode {mode!r}; choose from {list(MODE_PARTS)}")
    uses_graph, filtered, with_boxes = MODE_PARTS[mode]
    if not (uses_graph or with_boxes):
        return Context(task, None, 0)
    if view_graph is None:
        raise ValueError(f"mode {mode!r} needs a graph of view {view!r}")
    graph = view_graph.graph if uses_graph else None
    boxes = ({name: box for name, box in view_graph.boxes.items()} if with_boxes else None)
    subject = MANIPULATED if filtered else None
    block = format_prompt_context(graph, view, ontology, subject_filter=subject, style=style, boxes=boxes)
    shown = 0 if graph is None else len(graph.filter_subject(ontology.manipulated) if filtered else graph)
    return Context(compose_prompt(task, block), view_graph.graph, shown)
