"""Per-camera ground-truth graphs from simulator state: what the backend calls every step.

Each camera's graph covers the objects visible in that camera (a box survives
projection) and uses that camera's boxes for the overlap test, while every
direction comes from world coordinates. So the wrist (``robot0_eye_in_hand``)
graph is the agentview rule applied to the objects the wrist camera sees, not a
wrist-frame graph, as in the reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sgvla.scene_graph.codec import decoder_for
from sgvla.scene_graph.projection import Camera, GeomBatch, ObjectGeoms, project_boxes_batch
from sgvla.scene_graph.relations import RelationParams, assign_relations_batch, one_frame
from sgvla.scene_graph.triplet import Graph

Box = tuple[int, int, int, int]


@dataclass(frozen=True)
class ViewGraph:
    """One camera in one frame: the graph and the boxes of the visible objects."""

    camera: str
    graph: Graph
    boxes: dict[str, Box]


@dataclass(frozen=True, eq=False)
class ViewBatch:
    """One camera over F frames, as arrays; ``relations`` indexes ``RELATIONS`` (-1 = none)."""

    camera: str
    names: tuple[str, ...]
    boxes: np.ndarray
    visible: np.ndarray
    relations: np.ndarray

    def graphs(self) -> list[Graph]:
        return decoder_for(self.names).graphs_from_relations(self.relations)

    def frame(self, index: int) -> ViewGraph:
        rows, seen = self.boxes[index].tolist(), self.visible[index].tolist()
        boxes = {name: tuple(row) for name, row, v in zip(self.names, rows, seen) if v}
        graph = decoder_for(self.names).graphs_from_relations(self.relations[index : index + 1])[0]
        return ViewGraph(self.camera, graph, boxes)  # type: ignore[arg-type]


def ground_truth_batch(
    names: Sequence[str],
    geoms: GeomBatch,
    positions: np.ndarray,
    cameras: Mapping[str, Camera],
    task: str,
    params: RelationParams = RelationParams(),
) -> dict[str, ViewBatch]:
    """Graphs of F frames for every camera; ``positions`` (F, N, 3) are object body positions."""
    names = tuple(names)
    positions = np.asarray(positions, dtype=np.float64)
    if geoms.n_objects != len(names):
        raise ValueError(f"geoms describe {geoms.n_objects} objects but {len(names)} names were given")
    if positions.shape != (geoms.n_frames, len(names), 3):
        raise ValueError(f"positions must have shape ({geoms.n_frames}, {len(names)}, 3), got {positions.shape}")
    result = {}
    for view, camera in cameras.items():
        boxes, visible = project_boxes_batch(geoms, camera, params)
        relations = assign_relations_batch(names, positions, boxes, visible, task, params)
        result[view] = ViewBatch(view, names, boxes, visible, relations)
    return result


def ground_truth_graphs(
    names: Sequence[str],
    geoms: Sequence[ObjectGeoms],
    positions: np.ndarray,
    cameras: Mapping[str, Camera],
    task: str,
    params: RelationParams = RelationParams(),
) -> dict[str, ViewGraph]:
    """One frame: per-object geoms, ``positions`` (N, 3), one pose per camera."""
    positions = one_frame(positions, (len(names), 3), "positions", np.float64)
    batch = ground_truth_batch(names, GeomBatch.from_objects(geoms), positions, cameras, task, params)
    return {view: views.frame(0) for view, views in batch.items()}
