"""`scene_graph/markers`: the scene graph as a visualization_msgs/MarkerArray (RViz, Foxglove's 3D panel).

The geometry is `sgvla.nodegraph.markers` (no ROS); this turns its descriptions into messages and publishes them
for a graph node (scene_graph, so101_twin, fiducial_graphs), which calls `SceneMarkerPublisher.publish` after each
graph update. Each message is the whole current picture: ADD for every marker (ids are stable, so a marker that
stays is replaced in place) and DELETE for those of the previous message that went away, so no stale arrow stays
when a relation ends and a viewer that joins late draws the full scene from its first message.

QoS `reliable` (reliable, volatile, keep last 10): a lost message could leave a deleted marker standing, and RViz's
and Foxglove's subscribers (reliable or best effort, volatile) both match it; nothing is kept for late joiners,
which need none. Nothing is computed while nobody subscribes (a viewer, a bag recorder), and at most one message goes
out every `MIN_PERIOD_S` of wall time (the graph due then; a message of a few hundred markers costs tens of
milliseconds of rclpy message building, which a lock-step loop at hundreds of steps per second must not pay each
step). Parameter `scene_markers` (default true, declared by each graph node) turns it off.
"""

from __future__ import annotations

import time

from geometry_msgs.msg import Point
from visualization_msgs.msg import Marker, MarkerArray

from sgvla.nodegraph.markers import ARROW, CUBE, TEXT, MarkerSpec, scene_markers
from sgvla_ros.qos import QOS

TOPIC = "scene_graph/markers"
MIN_PERIOD_S = 0.2  # at most 5 marker messages per second
KIND = {CUBE: Marker.CUBE, ARROW: Marker.ARROW, TEXT: Marker.TEXT_VIEW_FACING}


def marker_msg(spec: MarkerSpec, header) -> Marker:
    m = Marker(header=header, ns=spec.ns, id=spec.id, type=KIND[spec.kind], action=Marker.ADD, text=spec.text,
               frame_locked=False)
    m.pose.position.x, m.pose.position.y, m.pose.position.z = spec.position
    q = m.pose.orientation
    q.x, q.y, q.z, q.w = spec.orientation
    m.scale.x, m.scale.y, m.scale.z = spec.scale
    m.color.r, m.color.g, m.color.b, m.color.a = spec.color
    m.points = [Point(x=p[0], y=p[1], z=p[2]) for p in spec.points]
    return m


def marker_array(specs: list[MarkerSpec], header, gone: set[tuple[str, int]] = frozenset()) -> MarkerArray:
    """ADD for every spec, then DELETE for each (ns, id) in `gone` (in sorted order)."""
    deletes = [Marker(header=header, ns=ns, id=i, action=Marker.DELETE) for ns, i in sorted(gone)]
    return MarkerArray(markers=[marker_msg(s, header) for s in specs] + deletes)


class SceneMarkerPublisher:
    """A graph node's `scene_graph/markers` publisher, with the keys it drew last (to delete what went away)."""

    def __init__(self, node, enabled: bool = True, topic: str = TOPIC, min_period_s: float = MIN_PERIOD_S) -> None:
        """`enabled`: the node's `scene_markers` parameter (declared by the node, documented in its parameter
        file); off, no publisher is made."""
        self.publisher = node.create_publisher(MarkerArray, topic, QOS["reliable"]) if enabled else None
        self.drawn: set[tuple[str, int]] = set()
        self.published = 0
        self.min_period_s, self.last = min_period_s, -float("inf")

    def wanted(self) -> bool:
        """Whether a message is due: markers on, someone subscribed, the last one at least min_period_s ago."""
        return (self.publisher is not None and time.monotonic() - self.last >= self.min_period_s
                and self.publisher.get_subscription_count() > 0)

    def publish(self, header, objects, graphs, target: str = "", place: str = "", prefix: str = "") -> bool:
        """Draw `objects` (ObjectBox list) and `graphs` (camera -> triplets) in `header.frame_id`, when anyone
        listens; True when a message went out."""
        if not self.wanted():
            return False
        specs = scene_markers(objects, graphs, target, place, prefix).markers
        keys = {s.key for s in specs}
        self.publisher.publish(marker_array(specs, header, self.drawn - keys))
        self.drawn = keys
        self.published += 1
        self.last = time.monotonic()
        return True


class OverlayPublishers:
    """`scene_graph/<camera>/overlay` of a graph node whose graphs are not paired with images by stamp (so101_twin,
    fiducial_graphs): the graph drawn on the image it was made from (`sgvla.nodegraph.overlay`, boxes in upright
    rows), QoS `sensor` as the scene_graph node's overlays; drawn only while something subscribes."""

    def __init__(self, node, cameras, ontology: str = "so101_tabletop") -> None:
        from sensor_msgs.msg import Image

        from sgvla.scene_graph import load_ontology

        self.ontology = load_ontology(ontology)
        self.pubs = {c: node.create_publisher(Image, f"scene_graph/{c}/overlay", QOS["sensor"]) for c in cameras}

    def publish(self, camera: str, upright, view_graph, header) -> bool:
        pub = self.pubs.get(camera)
        if pub is None or pub.get_subscription_count() == 0 or upright is None:
            return False
        import numpy as np

        from sgvla.nodegraph.overlay import draw_overlay
        from sgvla_ros.graph_io import image_msg

        canvas = draw_overlay(np.asarray(upright)[..., :3], view_graph, self.ontology, boxes_stored=False)
        pub.publish(image_msg(np.ascontiguousarray(canvas), header))
        return True
