"""The graph sources of episodes stepped over topics: the engine asks a source for the live graph of a view, and
these give what a node received for it (the scene_graph node's `graph_context/<view>`; fiducial_graphs'
`scene_graph/<view>` and `perception/objects`), never compute one. A missing or stale input is an infrastructure
failure of the episode, not an empty graph."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sgvla.core.episode import InfrastructureFailure
from sgvla.scene_graph import Graph, ViewGraph


class TopicGraphSource:
    """The live graph as the graph node published it for the current step (`graph_context/<view>`); the node sets
    `current` before every step the engine takes (vla_policy)."""

    def __init__(self, name: str):
        self.name = name
        self.current: ViewGraph | None = None

    def reset(self) -> None:
        pass

    def view_graph(self, view, observation, scene, task) -> ViewGraph:
        if self.current is None:
            raise InfrastructureFailure(f"no graph of view {view!r} for this step")
        return self.current

    def stats(self) -> dict:
        return {}

    def close(self) -> None:
        pass


class PerceivedGraph:
    """The graph source of an episode on the arm with perception (arm_policy): the newest fiducial graph of the view,
    with the boxes perception/objects gives for that camera. `graph(view)` and `objects()` return the newest message
    of each, or raise InfrastructureFailure when there is none recent enough."""

    name = "fiducial"  # SceneGraph.SOURCE_FIDUCIAL

    def __init__(self, graph: Callable[[str], Any], objects: Callable[[], Any]) -> None:
        self.graph, self.objects = graph, objects
        self.graphs = 0

    def reset(self) -> None:
        self.graphs = 0

    def view_graph(self, view, observation, scene, task) -> ViewGraph:
        msg, objects = self.graph(view), self.objects()
        boxes = {}
        for obj in objects.objects:
            if view in obj.camera_names:
                i = list(obj.camera_names).index(view)
                if obj.visible_in[i]:
                    boxes[obj.name] = tuple(int(v) for v in obj.boxes[4 * i:4 * i + 4])
        self.graphs += 1
        return ViewGraph(view, Graph.of([(t.subject, t.relation, t.object) for t in msg.triplets]),
                         {n: boxes.get(n, (0, 0, 0, 0)) for n in msg.objects})

    def stats(self) -> dict:
        return {"graphs": self.graphs}

    def close(self) -> None:
        pass
