"""Scene graphs from a VLM looking at a camera topic, published as sgvla_interfaces/SceneGraph (source=vlm).

The VLM runs in sgvla's LatestFrameWorker: images only replace the pending frame, queries start at
most `rate_hz` times per second, and each new answer is published once, so a slow VLM never
blocks the camera or the control loop.
"""

import numpy as np
from sensor_msgs.msg import Image

import sgvla.plugins  # noqa: F401  (registers the suites: the default plan's suite gives the defaults)
from sgvla.eval.config import default_suite
from sgvla.scene_graph.ontology import load_ontology
from sgvla.vlm.config import load_client_config, make_vlm
from sgvla.vlm.live import LatestFrameWorker
from sgvla.vlm.prompts import DEFAULT_PROMPT, canonical_camera, load_prompt
from sgvla_interfaces.msg import SceneGraph
from sgvla_ros.runtime import ResourceNode, run_node
from sgvla_ros.conversions import record_to_msg
from sgvla_ros.qos import QOS

CHANNELS = {"rgb8": (3, False), "bgr8": (3, True), "rgba8": (4, False), "bgra8": (4, True), "mono8": (1, False)}


def image_to_array(msg: Image) -> np.ndarray:
    """(H, W, 3) uint8 RGB of an 8-bit image message, honouring its row step."""
    if msg.encoding not in CHANNELS:
        raise ValueError(f"unsupported image encoding {msg.encoding!r}; use one of {sorted(CHANNELS)}")
    channels, bgr = CHANNELS[msg.encoding]
    rows = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)
    pixels = rows[:, : msg.width * channels].reshape(msg.height, msg.width, channels)
    if channels == 1:
        return np.repeat(pixels, 3, axis=2)
    return np.ascontiguousarray(pixels[..., 2::-1] if bgr else pixels[..., :3])


class VLMQuery(ResourceNode):
    def __init__(self):
        super().__init__("vlm_query")
        self.declare_parameter("client", "")  # a name in config/vlm/clients/ or a YAML path
        self.declare_parameter("prompt", str(DEFAULT_PROMPT))
        self.declare_parameter("ontology", default_suite().ontology)
        self.declare_parameter("camera", default_suite().views[0])
        self.declare_parameter("task", "")
        self.declare_parameter("image_topic", "image")
        self.declare_parameter("topic", "scene_graph")
        self.declare_parameter("rate_hz", 1.0)
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        if not param("client"):
            raise ValueError("vlm_query: set the 'client' parameter (client config name or YAML path)")
        self.ontology = load_ontology(param("ontology"))
        self.prompt = load_prompt(param("prompt"))
        self.camera = canonical_camera(param("camera"), self.prompt)
        self.task = param("task")
        vlm = self.own(make_vlm(load_client_config(param("client")), self.prompt, self.ontology))
        self.worker = self.own(LatestFrameWorker(vlm, param("rate_hz")))
        self.publisher = self.create_publisher(SceneGraph, param("topic"), QOS["reliable"])
        self.create_subscription(Image, param("image_topic"), self.on_image, QOS["sensor"])
        self.published = None
        self.create_timer(0.02, self.publish_latest)

    def on_image(self, msg: Image):
        try:
            self.worker.submit(image_to_array(msg), self.task, self.camera)
        except ValueError as exc:
            self.get_logger().error(str(exc), throttle_duration_sec=5.0)

    def publish_latest(self):
        live = self.worker.latest()
        if live is None or live is self.published:
            return
        self.published = live
        answer = live.answer
        if answer.completion.error:
            self.get_logger().warning(f"VLM query failed: {answer.completion.error}", throttle_duration_sec=5.0)
        record = {"camera": self.camera, "source": SceneGraph.SOURCE_VLM, "objects": list(self.ontology.objects),
                  "triplets": [list(t) for t in answer.graph], "model": answer.model,
                  "prompt_version": self.prompt.label}
        msg = record_to_msg(record)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.publisher.publish(msg)


def main(args=None):
    raise SystemExit(run_node(VLMQuery, args))


if __name__ == "__main__":
    main()
