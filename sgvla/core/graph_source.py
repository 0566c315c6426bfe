"""Where an episode's live scene graph comes from: registered graph sources.

A source turns the current step into the `ViewGraph` (triplets, and boxes where it knows them) of a camera view;
the episode engine asks it every step of a mode that reads the graph. ``ground_truth`` reads the backend's
geometry (the paper's live context); ``vlm`` (sgvla.vlm.source) asks a VLM about the camera image; ``fiducial``
(sgvla.so101.perception.source) gives the graph of the objects a suite with perception perceives from their markers;
a source that cannot give a graph raises `InfrastructureFailure`, so its failure is never counted as the policy's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sgvla.core.protocols import Backend, GraphSource
from sgvla.core.registry import Choice
from sgvla.core.state import GROUND_TRUTH
from sgvla.scene_graph import Ontology, ViewGraph


@dataclass
class GraphSourceConfig(Choice, kind="graph source"):
    gives_boxes: ClassVar[bool] = True  # boxes of the visible objects (the bounding-box context modes need them)
    reads_images: ClassVar[bool] = False  # needs camera images rendered
    reads_simulator: ClassVar[bool] = False  # reads the simulator's geometry (none where objects are perceived)
    perceived: ClassVar[bool] = False  # the graph of the objects as the suite perceives them (needs its perception)
    # Carried by the node graph (`sgvla launch`): the scene_graph node publishes it from the scene topic (the
    # simulator's scene, or the perceived one), fiducial_graphs on the arm. Others run in process only.
    over_topics: ClassVar[bool] = False

    def check_environment(self, plan: Any) -> None:
        """Fail before the first episode on what the config alone cannot tell (a client's file or API key, the
        cameras it reads in `plan`'s tasks); `plan` is the evaluation plan (sgvla.eval.config.EvalConfig)."""

    def stored_settings(self) -> dict[str, Any] | None:
        """What a run folder stores beside the plan because it can change apart from it (a VLM client's file),
        or None; a resumed run must resolve to the same."""
        return None

    def make(self, backend: Backend, ontology: Ontology, upright: Callable[[np.ndarray], np.ndarray]) -> GraphSource:
        """The source of one backend; `upright` turns that backend's camera images upright (the suite's
        `SuiteConfig.upright`), for sources that look at them."""
        raise NotImplementedError


class GroundTruthSource:
    """Graphs and boxes computed from the backend's geometry."""

    name = GROUND_TRUTH

    def __init__(self, backend: Backend):
        self.backend = backend

    def reset(self) -> None:
        pass

    def view_graph(self, view: str, observation: Any, scene: Any, task: str) -> ViewGraph:
        return self.backend.ground_truth([view], scene=scene)[view]

    def stats(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


@GraphSourceConfig.register(GROUND_TRUTH)
@dataclass
class GroundTruthConfig(GraphSourceConfig):
    reads_simulator: ClassVar[bool] = True
    over_topics: ClassVar[bool] = True

    def make(self, backend: Backend, ontology: Ontology, upright: Callable[[np.ndarray], np.ndarray]
             ) -> GroundTruthSource:
        return GroundTruthSource(backend)
