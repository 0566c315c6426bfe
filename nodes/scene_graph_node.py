"""scene_graph: live scene graphs per camera from the scene state (the simulator's, or one perceived from markers).

For every `sim/scene` it computes each camera's graph and boxes with the scene-graph core (the computation of a
backend's `ground_truth`) and publishes `scene_graph/<camera>` (SceneGraph; source: the scene's own, ground_truth
for the simulator's state, fiducial for a perceived one) and
`graph_context/<camera>` (GraphContext: graph, boxes and the serialized context text, keyed by (episode, step));
with `overlay: true` it draws the graph on the camera images (`scene_graph/<camera>/overlay`); with
`scene_markers: true` (default) it publishes `scene_graph/markers` (MarkerArray in the scene's frame: the objects'
boxes and names, an arrow per triplet of each camera's graph, the episode's target and place highlighted;
`sgvla_ros.markers`), computed only while something subscribes.
"""

import time
from collections import OrderedDict

import numpy as np
from sensor_msgs.msg import Image

import sgvla.plugins  # noqa: F401  (registers the suites: the default plan's suite gives the defaults)
from sgvla.eval.config import default_suite
from sgvla.core.state import ground_truth_views
from sgvla.scene_graph import format_prompt_context, load_ontology
from sgvla_interfaces.msg import GraphContext, SceneGraph
from sgvla_interfaces.msg import SceneState as SceneStateMsg
from sgvla.nodegraph.markers import scene_boxes
from sgvla_ros.graph_io import image_msg, scene_graph_msg, stamp_key, upright_image_of, \
    view_graph_to_msg
from sgvla_ros.markers import SceneMarkerPublisher
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import SgvlaNode, run_node
from sgvla_ros.state_io import scene_of

KEEP = 8  # graphs and images kept per camera to pair overlays


class SceneGraphNode(SgvlaNode):
    def __init__(self, **kwargs):
        super().__init__("scene_graph", **kwargs)
        self.declare_parameter("ontology", default_suite().ontology)
        self.declare_parameter("context_style", "reference")  # of the serialized text: reference | compact | json
        self.declare_parameter("cameras", list(default_suite().rendered()))  # topics created up front
        self.declare_parameter("overlay", False)  # draw graphs on the camera images
        self.declare_parameter("scene_markers", True)  # scene_graph/markers (MarkerArray) while subscribed
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        self.ontology = load_ontology(param("ontology"))
        self.style = param("context_style")
        self.overlay = bool(param("overlay"))
        self.pubs: dict = {}
        self.graphs: dict[str, OrderedDict] = {}
        self.images: dict[str, OrderedDict] = {}
        self.markers = SceneMarkerPublisher(self, bool(param("scene_markers")))
        for camera in param("cameras"):
            self._pubs(camera)
        self.create_subscription(SceneStateMsg, "sim/scene", self.on_scene, QOS["control"])
        self.get_logger().info("ready")

    def _pubs(self, camera: str):
        if camera not in self.pubs:
            overlay = None
            if self.overlay:
                overlay = self.create_publisher(Image, f"scene_graph/{camera}/overlay", QOS["sensor"])
                self.create_subscription(Image, f"camera/{camera}/image_raw",
                                         lambda msg, c=camera: self.on_image(c, msg), QOS["sensor"])
            self.pubs[camera] = (self.create_publisher(SceneGraph, f"scene_graph/{camera}", QOS["reliable"]),
                                 self.create_publisher(GraphContext, f"graph_context/{camera}", QOS["control"]),
                                 overlay)
            self.graphs[camera], self.images[camera] = OrderedDict(), OrderedDict()
        return self.pubs[camera]

    def on_scene(self, msg: SceneStateMsg):
        t = time.perf_counter()
        scene, facts = scene_of(msg)
        graphs = ground_truth_views(scene)
        compute_ms = 1000 * (time.perf_counter() - t)
        for camera, vg in graphs.items():
            graph_pub, context_pub, _ = self._pubs(camera)
            text = format_prompt_context(vg.graph, camera, self.ontology, subject_filter=None, style=self.style,
                                         boxes=vg.boxes)
            graph_pub.publish(scene_graph_msg(vg, msg.header, scene.source))
            context_pub.publish(view_graph_to_msg(vg, msg.header, msg.episode, msg.step, text, compute_ms))
            if self.overlay:
                self._remember(self.graphs[camera], stamp_key(msg.header.stamp), vg)
                self.draw(camera, stamp_key(msg.header.stamp))
        if self.markers.wanted():
            target, place = facts["goal"]
            self.markers.publish(msg.header, scene_boxes(scene), {c: vg.graph for c, vg in graphs.items()},
                                 target or self.ontology.manipulated, place, prefix=f"{scene.source}/")

    def on_image(self, camera: str, msg: Image):
        key = stamp_key(msg.header.stamp)
        self._remember(self.images[camera], key, msg)
        self.draw(camera, key)

    def draw(self, camera: str, key: int):
        vg, image = self.graphs[camera].get(key), self.images[camera].get(key)
        if vg is None or image is None:
            return
        from sgvla.nodegraph.overlay import draw_overlay

        del self.images[camera][key]
        canvas = draw_overlay(upright_image_of(image), vg, self.ontology)
        self.pubs[camera][2].publish(image_msg(np.ascontiguousarray(canvas), image.header))

    @staticmethod
    def _remember(store: OrderedDict, key: int, value) -> None:
        store[key] = value
        while len(store) > KEEP:
            store.popitem(last=False)


def main(args=None):
    raise SystemExit(run_node(SceneGraphNode, args))


if __name__ == "__main__":
    main()
