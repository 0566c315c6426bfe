"""What the evaluation nodes (sim_bridge, scene_graph, vla_policy, evaluator, bag_recorder) share: message
<-> sgvla conversions (simulator state, graphs, images, camera info, stamps). QoS profiles are in
`sgvla_ros.qos` (named as in the topic table, `sgvla.launch.plan.QOS`), the run loop in `sgvla_ros.runtime`."""

import array

import numpy as np
from builtin_interfaces.msg import Time
from sensor_msgs.msg import CameraInfo, Image

from sgvla.nodegraph import codec
from sgvla_interfaces.msg import GraphContext, SceneGraph, SimState, Triplet


def stamp(seconds: float) -> Time:
    ns = int(round(seconds * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def stamp_key(t: Time) -> int:
    return int(t.sec) * 1_000_000_000 + int(t.nanosec)


# -- simulator state ------------------------------------------------------------------------------

def state_to_msg(state, sim_time: float, frame_id: str = "world") -> SimState:
    """A `sgvla.nodegraph.episode.StepState` as a SimState message (payload bit-exact)."""
    msg = SimState()
    msg.header.stamp = stamp(sim_time)
    msg.header.frame_id = frame_id
    msg.episode, msg.step, msg.max_steps = int(state.episode), int(state.step), int(state.max_steps)
    msg.success, msg.done = bool(state.success), bool(state.done)
    scene = state.scene
    msg.task, msg.task_language = state.task, scene.task
    msg.objects = list(scene.objects)
    msg.positions = array.array("d", np.ascontiguousarray(scene.positions, dtype=np.float64).tobytes())
    msg.eef_pos = np.asarray(scene.eef_pos, dtype=np.float64)
    msg.payload_meta, data = codec.encode(state.payload())
    msg.payload_data = data
    return msg


def positions_of(msg: SimState) -> np.ndarray:
    return np.frombuffer(msg.positions, dtype=np.float64).reshape(-1, 3)


def payload_of(msg: SimState, resolve=True) -> dict:
    """The decoded payload: scene (SceneState), info, raw observation parts (see StepState.payload)."""
    return codec.decode(msg.payload_meta, bytes(msg.payload_data), resolve=resolve)


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


def scene_graph_msg(view_graph, header) -> SceneGraph:
    msg = SceneGraph()
    msg.header = header
    msg.camera = view_graph.camera
    msg.source = SceneGraph.SOURCE_GROUND_TRUTH
    msg.objects = list(view_graph.boxes)
    msg.triplets = [Triplet(subject=s, relation=r, object=o) for s, r, o in view_graph.graph]
    return msg


def view_graph_of(msg: GraphContext):
    from sgvla.nodegraph.episode import view_graph_from_parts

    g = msg.graph
    return view_graph_from_parts(g.camera, [(t.subject, t.relation, t.object) for t in g.triplets], list(g.objects),
                                 list(msg.boxes))


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


def stored_image_of(msg: Image) -> np.ndarray:
    """The simulator's stored-convention (H, W, 3) uint8 image from an upright rgb8 message (exact)."""
    if msg.encoding != "rgb8":
        raise ValueError(f"expected an rgb8 image, got {msg.encoding!r}")
    rows = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)
    upright = rows[:, : msg.width * 3].reshape(msg.height, msg.width, 3)
    return np.ascontiguousarray(upright[::-1, ::-1])


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
