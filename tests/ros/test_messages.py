"""What crosses a topic comes back the same: the codec, SimState/GraphContext/Image through rclpy's CDR
serialization, raw observations, overlays, and MCAP recordings read back with rosbags."""

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest

from sgvla.nodegraph import codec
from sgvla.nodegraph.episode import StepState, raw_observation, view_graphs
from sgvla.scene_graph import Camera, GeomBatch, Graph, ViewGraph, load_ontology
from sgvla.core.state import object_aabbs

pytestmark = pytest.mark.ros


@dataclasses.dataclass(frozen=True, eq=False)
class Scene:  # the shape of sgvla.libero.env.SceneState, without importing the simulator
    objects: tuple
    positions: np.ndarray
    geoms: GeomBatch
    cameras: dict
    eef_pos: np.ndarray
    eef_mat: np.ndarray
    gripper_qpos: np.ndarray
    task: str


def scene(seed: int = 0) -> Scene:
    rng = np.random.default_rng(seed)
    names = ("akita_black_bowl_1", "akita_black_bowl_2", "plate_1", "cookies_1")
    positions = np.array([[0.0, 0.1, 0.9], [0.1, -0.1, 0.9], [-0.1, 0.0, 0.9], [0.05, 0.2, 0.92]])
    positions += rng.normal(0, 1e-3, positions.shape)
    owner = np.array([0, 0, 1, 2, 3])
    centers = positions[owner][None] + rng.normal(0, 1e-3, (1, 5, 3))
    rotations = np.repeat(np.eye(3)[None, None], 5, axis=1)
    geoms = GeomBatch(owner, centers, rotations, np.full((5, 3), 0.03), len(names))
    f = 0.5 * 128 / np.tan(np.deg2rad(45) / 2)
    K = np.array([[f, 0, 64.0], [0, f, 64.0], [0, 0, 1]])
    eye, target = np.array([0.9, 0.0, 1.5]), np.array([0.0, 0.0, 0.9])
    z = (target - eye) / np.linalg.norm(target - eye)  # OpenCV axes: z forward, x right, y down
    x = np.cross(z, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([x, np.cross(z, x), z], axis=1)
    pose[:3, 3] = eye
    cameras = {"agentview": Camera("agentview", K, pose, 128, 128)}
    return Scene(names, positions, geoms, cameras, rng.normal(size=3), np.eye(3), np.array([0.04, -0.04]),
                 "pick up the black bowl between the plate and the ramekin and place it on the plate")


def same(a, b) -> bool:
    """Bit-identical trees (arrays by bytes and dtype)."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if dataclasses.is_dataclass(a):  # this module's Scene comes back as a namespace (not a sgvla class)
        kind = type(b) is (SimpleNamespace if type(a) is Scene else type(a))
        return kind and all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a) if f.init)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


def test_codec_round_trip_is_bit_exact():
    info = {"goal": ("akita_black_bowl_1", "plate_1"), "table_center": np.array([0.1, 0.2, 0.3])}
    tree = {"scene": scene(), "info": info,
            "misc": [0.1, 1 / 3, float("nan"), -0.0, 1e-310, None, True, 7, "x"], 3: (np.float32(0.1), np.int64(2)),
            "ints": np.arange(6, dtype=np.intp).reshape(2, 3), "u8": np.zeros((2, 2, 3), np.uint8)}
    meta, data = codec.encode(tree)
    back = codec.decode(meta, data, resolve=lambda name: name.startswith("sgvla."))
    assert same(tree["scene"], back["scene"]) and same(tree["info"], back["info"]) and same(tree["misc"], back["misc"])
    assert back[3][0].dtype == np.float32 and back[3][0] == np.float32(0.1) and back["ints"].dtype == np.intp
    assert back["scene"].positions.flags.writeable and back["scene"].positions.flags.aligned
    assert math.copysign(1, back["misc"][3]) == -1.0


def test_codec_rebuilds_only_sgvla_classes():
    @dataclasses.dataclass
    class Local:
        x: int

    meta, data = codec.encode(Local(1))
    with pytest.raises(ValueError, match="refusing"):
        codec.decode(meta.replace(Local.__module__, "os"), data)
    meta, data = codec.encode({"scene": scene()})
    light = codec.decode(meta, data, resolve=codec.light_modules)["scene"]
    assert isinstance(light, SimpleNamespace) and isinstance(light.geoms, GeomBatch)
    assert isinstance(light.cameras["agentview"], Camera)


def test_graphs_from_a_decoded_state_equal_the_originals():
    s = scene()
    meta, data = codec.encode({"scene": s})
    light = codec.decode(meta, data, resolve=codec.light_modules)["scene"]
    want, got = view_graphs(s), view_graphs(light)
    assert want.keys() == got.keys()
    for view in want:
        assert want[view].graph == got[view].graph and want[view].boxes == got[view].boxes
    centers, halves = object_aabbs(light)
    assert centers.shape == (4, 3) and np.all(halves > 0)


def test_sim_state_through_cdr():
    from rclpy.serialization import deserialize_message, serialize_message

    from sgvla_interfaces.msg import SimState
    from sgvla_ros.graph_io import payload_of, positions_of, state_to_msg

    s = scene(1)
    images = {"agentview": np.arange(4 * 4 * 3, dtype=np.uint8).reshape(4, 4, 3)}
    raw = {"pixels": {"image": images["agentview"]}, "robot_state": {"eef": {"pos": np.array([0.1, 0.2, 0.3])}}}
    obs = SimpleNamespace(raw=raw, images=images)
    state = StepState(3, 7, 40, False, False, "prompt", obs, s, {"goal": ("a", "b"), "table_center": np.ones(3)})
    msg = deserialize_message(serialize_message(state_to_msg(state, 12.35)), SimState)
    assert (msg.episode, msg.step, msg.max_steps, msg.task, msg.task_language) == (3, 7, 40, "prompt", s.task)
    assert msg.header.stamp.sec == 12 and msg.header.stamp.nanosec == 350_000_000
    assert positions_of(msg).tobytes() == s.positions.tobytes()
    payload = payload_of(msg, resolve=lambda name: name.startswith("sgvla.scene_graph"))
    assert same(s.geoms, payload["scene"].geoms) and same(state.info, payload["info"])
    assert payload["pixel_keys"] == {"agentview": "image"}
    rebuilt = raw_observation(payload, images)
    assert same(raw, rebuilt)
    assert "image" not in raw_observation(payload, {})["pixels"]  # no images for policies that read none


def test_graph_context_and_images_through_cdr():
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header

    from sgvla_interfaces.msg import GraphContext
    from sgvla_ros.graph_io import image_msg, stored_image_of, stored_to_upright, view_graph_of, view_graph_to_msg

    vg = ViewGraph("agentview", Graph.of([("plate_1", "is_left_of", "cookies_1"), ("cookies_1", "is_right_of",
                                                                                  "plate_1")]),
                   {"plate_1": (1, 2, 30, 40), "cookies_1": (5, 6, 7, 8)})
    msg = view_graph_to_msg(vg, Header(frame_id="world"), 2, 5, "text", 1.5)
    back = view_graph_of(deserialize_message(serialize_message(msg), GraphContext))
    assert back == vg and list(back.boxes) == list(vg.boxes)
    stored = np.random.default_rng(0).integers(0, 255, (6, 5, 3), dtype=np.uint8)
    image = deserialize_message(serialize_message(image_msg(stored_to_upright(stored), Header())), Image)
    assert image.encoding == "rgb8" and (image.height, image.width, image.step) == (6, 5, 15)
    assert stored_image_of(image).tobytes() == stored.tobytes()


def test_overlay_draws_boxes_and_triplets():
    from sgvla.nodegraph.overlay import MIN_HEIGHT, PANEL_WIDTH, draw_overlay

    s = scene()
    vg = view_graphs(s)["agentview"]
    assert vg.boxes, "the synthetic camera sees the objects"
    image = np.zeros((128, 128, 3), np.uint8)
    canvas = draw_overlay(image, vg, load_ontology("libero_spatial"))
    assert canvas.shape == (MIN_HEIGHT, 3 * 128 + PANEL_WIDTH, 3)
    assert canvas[:, : 3 * 128].any() and canvas[:, 3 * 128:].any()


def test_mcap_recording_reads_back(tmp_path):
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String

    from sgvla.nodegraph.bag import BagWriter, read_bag
    from sgvla_interfaces.msg import Action

    writer = BagWriter(tmp_path / "bag")
    writer.add_topic("/action", "sgvla_interfaces/msg/Action")
    writer.add_topic("/task", "std_msgs/msg/String")
    for step in range(3):
        writer.write("/action", 1_000 + step, serialize_message(Action(episode=1, step=step, data=[0.5, -1.0])))
    writer.write("/task", 2_000, serialize_message(String(data="pick up the bowl")))
    writer.close()
    assert len(writer.mcap_files) == 1 and (tmp_path / "bag" / "metadata.yaml").is_file()
    got = list(read_bag(tmp_path / "bag"))
    assert [t for t, _, _ in got] == ["/action"] * 3 + ["/task"]
    assert [m.step for _, _, m in got[:3]] == [0, 1, 2] and list(got[0][2].data) == [0.5, -1.0]
    assert got[3][2].data == "pick up the bowl"
    with pytest.raises(FileExistsError):
        BagWriter(tmp_path / "bag")
