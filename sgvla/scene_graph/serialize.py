"""Graphs as text: triplet lines and the semantic context appended to a VLA task prompt.

The ``reference`` style reproduces the reference prompt block::

    pick up the black bowl ... and place it on the plate
    Current simulator semantic context:
    Scene graph:
    View: agentview
    (target_akita_black_bowl, is_left_of, plate)

Names lose their instance suffix (``plate_1`` -> ``plate``) and the manipulated
object is written ``target_<name>``, in subject and object position, whether or
not the graph is subject-filtered. (The reference marks it only when filtered;
marking it always keeps the two bowls apart in an unfiltered graph.) An empty
graph is written ``(none)``. Lines follow graph order and repeated lines are
dropped, so the text is deterministic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from sgvla.scene_graph.ontology import Ontology, display_name
from sgvla.scene_graph.triplet import Graph

CONTEXT_HEADER = "Current simulator semantic context:"
MANIPULATED = "@manipulated"
STYLES = ("reference", "compact", "json")


def triplet_lines(graph: Graph) -> list[str]:
    """``(subject, relation, object)`` lines with the ontology's own names."""
    return [f"({s}, {r}, {o})" for s, r, o in graph]


def prompt_name(obj: str, ontology: Ontology) -> str:
    name = display_name(obj)
    return f"target_{name}" if obj == ontology.manipulated else name


def _unique(items: Sequence) -> list:
    return list(dict.fromkeys(items))


def format_prompt_context(
    graph: Graph | None,
    view: str,
    ontology: Ontology,
    *,
    subject_filter: str | None = MANIPULATED,
    style: str = "reference",
    boxes: Mapping[str, Sequence[int]] | None = None,
) -> str:
    """The context block for one camera view.

    ``subject_filter`` keeps only triplets with that subject: the default
    ``MANIPULATED`` means ``ontology.manipulated``; None keeps the full graph.
    ``boxes`` (object -> [x1, y1, x2, y2]) adds a bounding-box section listing
    every given box, sorted by object name. ``graph=None`` writes the boxes alone
    (the ``bounding_boxes`` context mode).
    """
    if style not in STYLES:
        raise ValueError(f"unknown context style {style!r}; choose one of {STYLES}")
    if graph is None and boxes is None:
        raise ValueError("a context needs a graph, boxes, or both")
    if subject_filter == MANIPULATED:
        subject_filter = ontology.manipulated
    if graph is not None and subject_filter is not None:
        graph = graph.filter_subject(subject_filter)
    triplets = _unique([(prompt_name(s, ontology), r, prompt_name(o, ontology)) for s, r, o in graph or ()])
    box_items = [(prompt_name(obj, ontology), [int(c) for c in boxes[obj]]) for obj in sorted(boxes or {})]

    if style == "json":
        payload: dict = {"view": view}
        if graph is not None:
            payload["scene_graph"] = [list(t) for t in triplets]
        if boxes is not None:
            payload["bounding_boxes"] = dict(box_items)
        return f"{CONTEXT_HEADER}\n{json.dumps(payload)}"
    if style == "compact":
        body = "; ".join(" ".join(t) for t in triplets) or "none"
        sections = [] if graph is None else [f"Scene graph ({view}): {body}"]
        if boxes is not None:
            listed = "; ".join(f"{name} {box}" for name, box in box_items) or "none"
            sections.append(f"Bounding boxes ({view}): {listed}")
        return "\n".join([CONTEXT_HEADER, *sections])
    lines = [f"({s}, {r}, {o})" for s, r, o in triplets] or ["(none)"]
    sections = [] if graph is None else ["\n".join(["Scene graph:", f"View: {view}", *lines])]
    if boxes is not None:
        listed = [f"{name}: {box}" for name, box in box_items] or ["(none)"]
        sections.append("\n".join(["Bounding boxes:", f"View: {view}", *listed]))
    return f"{CONTEXT_HEADER}\n" + "\n\n".join(sections)


def compose_prompt(task: str, context: str) -> str:
    """Task instruction, newline, context block: how the reference augments the LIBERO prompt."""
    return f"{task}\n{context}"


# Triplets as `format_prompt_context` writes them, one pattern per style.
_REFERENCE_LINE = re.compile(r"^\([^(),\n]+, [^(),\n]+, [^(),\n]+\)$", re.M)
_COMPACT_LINE = re.compile(r"^Scene graph \([^)\n]*\): (.*)$", re.M)
_JSON_TRIPLET = re.compile(r'\["[^"]*", "[^"]*", "[^"]*"\]')
_JSON_GRAPH = re.compile(r'"scene_graph": \[((?:' + _JSON_TRIPLET.pattern + r'(?:, )?)*)\]')


def triplet_spans(prompt: str) -> list[tuple[int, int]]:
    """Character spans of the scene-graph triplets in `prompt`'s context block, in prompt order: what a policy's
    token budget counts (`sgvla.policies.lerobot_vla`) and what the HTML report marks (`sgvla.eval.html_report`),
    read back from the text because a record keeps the prompt, not the graph it was written from.

    Reads the three styles of `format_prompt_context` (reference lines ``(a, r, b)``, the compact
    ``Scene graph (view): a r b; c r d`` line, the json ``scene_graph`` list); bounding boxes and
    the ``(none)``/``none`` placeholders are not triplets.
    """
    start = prompt.find(CONTEXT_HEADER)
    if start < 0:
        return []
    spans = [m.span() for m in _REFERENCE_LINE.finditer(prompt, start)]
    for line in _COMPACT_LINE.finditer(prompt, start):
        if line.group(1) == "none":
            continue
        pos = line.start(1)
        for item in line.group(1).split("; "):
            spans.append((pos, pos + len(item)))
            pos += len(item) + 2
    for graph in _JSON_GRAPH.finditer(prompt, start):
        spans += [m.span() for m in _JSON_TRIPLET.finditer(prompt, graph.start(1), graph.end(1))]
    return sorted(spans)
