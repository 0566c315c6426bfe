"""Ground-truth relation assignment from projected boxes and world positions.

The rules reproduce the reference generator of EmbodimentSemantic (paper, section
4.2) exactly. For every ordered pair (A, B), A != B, both visible in the camera:

1. Min-area overlap ``inter / min(area_A, area_B)`` of the two boxes (only when
   they intersect with positive width and height). If it is strictly above
   ``overlap_threshold`` and either name contains ``vertical_keyword``, the pair
   gets a vertical relation from world z: ``z_A >= z_B`` gives
   ``A is_on_top_of B``, otherwise ``A is_below_of B``. Equal z therefore puts
   both (A, B) and (B, A) "on top" (the tie rule).
   In the drawer task (``drawer_task_marker`` in the task text) the pair
   ``drawer_pair`` uses the same literal z test with containment names:
   ``z_A >= z_B`` gives ``A is_inside B``, otherwise ``A contains B``; so the
   direction follows z, exactly as the reference does.
2. Otherwise the dominant world-frame axis decides: with ``dx = x_A - x_B`` and
   ``dy = y_A - y_B``, ``|dx| >= |dy|`` gives ``is_in_front_of`` when dx > 0
   else ``is_behind``; otherwise ``is_left_of`` when dy > 0 else ``is_right_of``.
   Two objects at the same x and y are therefore ``is_behind`` each other.

Axes, literally: larger world x means "in front of", larger world y means "left
of". robosuite table-top scenes (LIBERO among them) put the robot base at negative
x facing +x, so "A is_in_front_of B" means A is further from the robot and "left"
is the robot's left; the agentview camera faces the robot, so these directions are
not image directions. No camera enters the rule: wrist graphs use the same frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sgvla.scene_graph.codec import decoder_for, unique_names
from sgvla.scene_graph.ontology import RELATION_INDEX
from sgvla.scene_graph.triplet import Graph

NO_RELATION = -1
LEFT, FRONT, ON_TOP, INSIDE = (
    RELATION_INDEX[name] for name in ("is_left_of", "is_in_front_of", "is_on_top_of", "is_inside")
)


@dataclass(frozen=True)
class RelationParams:
    """Thresholds and conventions of ground-truth generation (reference defaults).

    ``pad_px``, ``max_box_scale`` and ``min_depth`` govern box projection
    (see :mod:`sgvla.scene_graph.projection`); the rest govern relations.
    """

    overlap_threshold: float = 0.8
    pad_px: int = 5
    max_box_scale: float = 3.0
    min_depth: float = 0.01
    drawer_task_marker: str = "in the top drawer"
    drawer_pair: tuple[str, str] = ("akita_black_bowl_1", "wooden_cabinet_1")
    vertical_keyword: str = "bowl"


def is_drawer_task(task: str, params: RelationParams) -> bool:
    """Case-insensitive marker test; underscores count as spaces (LIBERO task ids use them)."""
    return params.drawer_task_marker.lower() in task.replace("_", " ").lower()


def assign_relations_batch(
    names: Sequence[str],
    positions: np.ndarray,
    boxes: np.ndarray,
    visible: np.ndarray,
    task: str,
    params: RelationParams = RelationParams(),
) -> np.ndarray:
    """Relation index of every ordered pair in F frames: (F, N, N) int8, -1 = none.

    ``positions`` (F, N, 3) world positions, ``boxes`` (F, N, 4) integer
    ``[x1, y1, x2, y2]``, ``visible`` (F, N). Entry [f, a, b] is the relation of
    ``(names[a], ?, names[b])`` (index into ``RELATIONS``); turn it into Graphs
    with ``decoder_for(tuple(names)).graphs_from_relations``.
    """
    names = unique_names(names)
    n = len(names)
    positions = np.asarray(positions, dtype=np.float64)
    boxes = np.asarray(boxes, dtype=np.int64)
    visible = np.asarray(visible, dtype=bool)
    if positions.ndim != 3 or positions.shape[1:] != (n, 3):
        raise ValueError(f"positions must have shape (F, {n}, 3), got {positions.shape}")
    frames = positions.shape[0]
    if boxes.shape != (frames, n, 4):
        raise ValueError(f"boxes must have shape ({frames}, {n}, 4), got {boxes.shape}")
    if visible.shape != (frames, n):
        raise ValueError(f"visible must have shape ({frames}, {n}), got {visible.shape}")

    # Layout (subject, object, frame): frames innermost keeps every operation on long rows.
    vis = visible.T
    pair = vis[:, None] & vis[None, :] & ~np.eye(n, dtype=bool)[:, :, None]
    x1, y1, x2, y2 = boxes.transpose(2, 1, 0)
    iw = np.minimum(x2[:, None], x2[None, :]) - np.maximum(x1[:, None], x1[None, :])
    ih = np.minimum(y2[:, None], y2[None, :]) - np.maximum(y1[:, None], y1[None, :])
    intersecting = pair & (iw > 0) & (ih > 0)
    area = (x2 - x1) * (y2 - y1)
    min_area = np.minimum(area[:, None], area[None, :])
    # Intersecting boxes have positive areas; the guard only avoids 0/0 elsewhere.
    overlap = (iw * ih) / np.where(intersecting, min_area, 1)
    vertical_name = np.array([params.vertical_keyword in name for name in names], dtype=bool)
    stacked = intersecting & (overlap > params.overlap_threshold)
    stacked &= (vertical_name[:, None] | vertical_name[None, :])[:, :, None]

    # Each pair's second relation is the first plus one (RELATIONS order), so a
    # direction is "first relation + (test failed)".
    x, y, z = positions.transpose(2, 1, 0)
    first_vertical = np.full((n, n, 1), ON_TOP, dtype=np.int8)
    if is_drawer_task(task, params) and all(name in names for name in params.drawer_pair):
        a, b = (names.index(name) for name in params.drawer_pair)
        first_vertical[a, b] = first_vertical[b, a] = INSIDE
    vertical = first_vertical + ~(z[:, None] >= z[None, :])
    dx = x[:, None] - x[None, :]
    dy = y[:, None] - y[None, :]
    horizontal = np.where(np.abs(dx) >= np.abs(dy), FRONT + ~(dx > 0), LEFT + ~(dy > 0)).astype(np.int8)
    relation = np.where(stacked, vertical, horizontal)
    relation[~pair] = NO_RELATION
    return relation.transpose(2, 0, 1).copy()


def one_frame(values: object, shape: tuple[int, ...], what: str, dtype: type) -> np.ndarray:
    """``values`` as a batch of one frame of ``shape``; an empty input is accepted for N = 0."""
    array = np.asarray(values, dtype=dtype)
    if array.size == 0 and shape[0] == 0:
        array = array.reshape(shape)
    if array.shape != shape:
        raise ValueError(f"{what} must have shape {shape}, got {array.shape}")
    return array[None]


def assign_relations(
    names: Sequence[str],
    positions: np.ndarray,
    boxes: np.ndarray,
    visible: np.ndarray,
    task: str,
    params: RelationParams = RelationParams(),
) -> Graph:
    """One frame's graph: ``positions`` (N, 3), ``boxes`` (N, 4), ``visible`` (N,)."""
    n = len(names)
    relations = assign_relations_batch(
        names,
        one_frame(positions, (n, 3), "positions", np.float64),
        one_frame(boxes, (n, 4), "boxes", np.int64),
        one_frame(visible, (n,), "visible", bool),
        task,
        params,
    )
    return decoder_for(tuple(names)).graphs_from_relations(relations)[0]
