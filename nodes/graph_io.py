"""What the nodes share: message <-> sgvla conversions of graphs, images, camera info and stamps (scene and robot
states, status and records: `sgvla_ros.state_io`). QoS profiles are in `sgvla_ros.qos`, the run loop in
`sgvla_ros.runtime`."""

import numpy as np
from builtin_interfaces.msg import Time
from sensor_msgs.msg import CameraInfo, Image

from sgvla.scene_graph import Graph, ViewGraph
from sgvla_interfaces.msg import GraphContext, SceneGraph, Triplet


def stamp(seconds: float) -> Time:
    ns = int(round(seconds * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def stamp_key(t: Time) -> int:
    return int(t.sec) * 1_000_000_000 + int(t.nanosec)


# -- graphs ---------------------------------------------------------------------------------------

def view_graph_to_msg(view_graph, header, episode: int, step: int, text: str, compute_ms: float) -> GraphContext:
    msg = GraphContext()
    msg.header = header
    msg.episode, msg.step = episode, step
    msg.graph = scene_graph_msg(view_graph, header)
    msg.boxes = [int(c) for box in view_graph.boxes.values() for c in box]
    msg.text = text
    msg.compute_ms = float(compute_ms)
    return msg


def scene_graph_msg(view_graph, header, source: str = SceneGraph.SOURCE_GROUND_TRUTH) -> SceneGraph:
    msg = SceneGraph()
    msg.header = header
    msg.camera = view_graph.camera
    msg.source = source
    msg.objects = list(view_graph.boxes)
    msg.triplets = [Triplet(subject=s, relation=r, object=o) for s, r, o in view_graph.graph]
    return msg


def view_graph_of(msg: GraphContext) -> ViewGraph:
    """The ViewGraph a GraphContext carries (objects in the original box order)."""
    g = msg.graph
    flat = [int(b) for b in msg.boxes]
    if len(flat) != 4 * len(g.objects):
        raise ValueError(f"{len(g.objects)} objects need {4 * len(g.objects)} box values, got {len(flat)}")
    boxes = {name: tuple(flat[4 * i:4 * i + 4]) for i, name in enumerate(g.objects)}
    return ViewGraph(g.camera, Graph.of([(t.subject, t.relation, t.object) for t in g.triplets]), boxes)


# -- images ---------------------------------------------------------------------------------------

def image_msg(upright: np.ndarray, header, encoding: str = "rgb8") -> Image:
    msg = Image()
    msg.header = header
    msg.height, msg.width = int(upright.shape[0]), int(upright.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = 0
    msg.step = int(upright.shape[1] * (upright.shape[2] if upright.ndim == 3 else 1))
    msg.data = np.ascontiguousarray(upright, dtype=np.uint8).tobytes()
    return msg


def stored_to_upright(stored: np.ndarray) -> np.ndarray:
    """LIBERO stores camera images turned 180 degrees (rows bottom-up); topics carry them upright."""
    return stored[::-1, ::-1]


def upright_image_of(msg: Image) -> np.ndarray:
    """The (H, W, 3) uint8 image of an rgb8 message, as published (upright: as cameras and datasets hold it)."""
    if msg.encoding != "rgb8":
        raise ValueError(f"expected an rgb8 image, got {msg.encoding!r}")
    rows = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)
    return rows[:, : msg.width * 3].reshape(msg.height, msg.width, 3)


def stored_image_of(msg: Image) -> np.ndarray:
    """The simulator's stored-convention (H, W, 3) uint8 image from an upright rgb8 message (exact)."""
    return np.ascontiguousarray(upright_image_of(msg)[::-1, ::-1])


def camera_info_msg(K: np.ndarray, width: int, height: int, header) -> CameraInfo:
    """Intrinsics of the upright image: turning by 180 degrees about a centered principal point keeps K."""
    msg = CameraInfo()
    msg.header = header
    msg.width, msg.height = int(width), int(height)
    msg.distortion_model = "plumb_bob"
    msg.d = [0.0] * 5
    K = np.asarray(K, dtype=np.float64)
    msg.k = K.reshape(-1)
    msg.r = np.eye(3).reshape(-1)
    P = np.zeros((3, 4))
    P[:, :3] = K
    msg.p = P.reshape(-1)
    return msg
