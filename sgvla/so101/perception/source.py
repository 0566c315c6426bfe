"""Graphs of the objects as perceived from their fiducial markers: the ``fiducial`` graph source (registered here).

    suite: {type: so101_twin, perception: true}
    graph_source: fiducial

Perception belongs to the suite, not to the source: a suite with ``perception: true`` (so101_twin, so101_hardware)
perceives its objects from the cameras' images every control step, and everything that reads objects then reads
the perceived ones, policies included (see `sgvla.so101.twin.perceived`; on the arm the fiducial_graphs node). This
source gives the live graph of that perception: per step, the view's graph and boxes of the perceived poses by the
simulator's projection and relation rules (`graphs_from_poses`), what the scene_graph node computes from the perceived
scene over topics. So the plan names both, and the config refuses one without the other (`sgvla.eval.config`): this
source on a suite that does not perceive (LIBERO's objects carry no markers), or the simulator's ground truth on one
that does. The cameras are rendered by the suite's perception itself (depth included, at its image size), so the
source reads no observation images (``reads_images`` is False; the arm's suite has none in process either).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sgvla.core.graph_source import GraphSourceConfig
from sgvla.scene_graph import Ontology, ViewGraph

FIDUCIAL = "fiducial"


class FiducialSource:
    """The view's graph of what the backend's perception (``backend.perception``: `graphs(task)` per camera) tracks
    now; the episode engine asks it after the backend perceived the step."""

    name = FIDUCIAL

    def __init__(self, backend: Any):
        self.backend = backend

    def reset(self) -> None:
        pass  # the backend's perception starts over with each reset

    def view_graph(self, view: str, observation: Any, scene: Any, task: str) -> ViewGraph:
        graphs = self.backend.perception.graphs(task)
        if view not in graphs:
            raise ValueError(f"graph_source fiducial: no camera {view!r} in the perception; it has {sorted(graphs)}")
        return graphs[view]

    def stats(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


@GraphSourceConfig.register(FIDUCIAL)
@dataclass
class FiducialSourceConfig(GraphSourceConfig):
    """No options: the markers, cameras and image size are the suite's perception's."""

    perceived: ClassVar[bool] = True
    over_topics: ClassVar[bool] = True

    def make(self, backend: Any, ontology: Ontology, upright: Callable[[np.ndarray], np.ndarray]) -> FiducialSource:
        if getattr(backend, "perception", None) is None:
            raise ValueError(f"graph_source fiducial needs a backend that perceives its objects (the suite's "
                             f"perception: true); {type(backend).__name__} does not")
        return FiducialSource(backend)
