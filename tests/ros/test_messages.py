"""What crosses a topic comes back the same: scene states, robot states, records, graphs and images through
rclpy's CDR serialization (typed fields, bit-exact), overlays, and MCAP recordings read back with rosbags."""

import dataclasses

import numpy as np
import pytest

from sgvla.core.episode import EpisodeRecord
from sgvla.core.state import Boxes, RobotState, SceneState, ground_truth_views, object_aabbs
from sgvla.scene_graph import Camera, GeomBatch, Graph, ViewGraph, load_ontology

pytestmark = pytest.mark.ros


def scene(seed: int = 0) -> SceneState:
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
    obstacles = Boxes(np.array([-1, 2]), rng.normal(size=(2, 3)), np.repeat(np.eye(3)[None], 2, axis=0),
                      np.full((2, 3), 0.1))
    return SceneState(names, positions, geoms, cameras, rng.normal(size=3), np.eye(3), np.array([0.04, -0.04]),
                      "pick up the black bowl between the plate and the ramekin and place it on the plate", obstacles,
                      source="fiducial")


def same(a, b) -> bool:
    """Bit-identical trees (arrays by bytes, dtype and shape)."""
    if isinstance(a, np.ndarray):
        b = np.asarray(b)
        return a.shape == b.shape and a.astype(b.dtype).tobytes() == b.tobytes() and (a.dtype.kind == b.dtype.kind)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a) if f.init)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def through_cdr(msg):
    from rclpy.serialization import deserialize_message, serialize_message

    return deserialize_message(serialize_message(msg), type(msg))


def test_scene_state_through_cdr_is_bit_exact():
    from std_msgs.msg import Header

    from sgvla_ros.state_io import scene_msg, scene_of

    s = scene(1)
    info = {"goal": ("akita_black_bowl_1", "plate_1"), "table_center": np.array([0.1, 1 / 3, 0.3])}
    msg = through_cdr(scene_msg(s, info, Header(frame_id="world"), 3, 7))
    assert (msg.episode, msg.step, msg.task_language) == (3, 7, s.task)
    back, facts = scene_of(msg)
    assert same(s, back) and facts["goal"] == info["goal"] and same(info["table_center"], facts["table_center"])
    assert back.positions.dtype == np.float64 and back.geoms.centers.shape == (1, 5, 3)
    # What the graph node computes from the message is what the backend computes from its own state.
    want, got = ground_truth_views(s), ground_truth_views(back)
    assert want.keys() == got.keys()
    for view in want:
        assert want[view].graph == got[view].graph and want[view].boxes == got[view].boxes
    centers, halves = object_aabbs(back)
    assert centers.shape == (4, 3) and np.all(halves > 0)


def test_robot_state_and_records_through_cdr():
    from std_msgs.msg import Header

    from sgvla_ros.state_io import eef_pose_msg, joint_state_msg, record_msg, record_of, robot_of

    rng = np.random.default_rng(2)
    robot = RobotState(("robot0_joint1", "gripper0_finger_joint1"), rng.normal(size=2), rng.normal(size=2),
                       rng.normal(size=3), np.array([0.0, 0.6, 0.0, 0.8]))
    back = robot_of(through_cdr(joint_state_msg(robot, Header())), through_cdr(eef_pose_msg(robot, Header())))
    assert same(robot, back)
    record = EpisodeRecord("expert", 3, "table7", "scene_graph", 9, success=True, steps=40, max_steps=280,
                           wall_time_s=1.234, task="t", prompt="t\nctx", view="agentview", graph_source="ground_truth",
                           graph_triplets=12, triplets_in_prompt=4, visible_objects=["plate_1"],
                           context_ms_per_step=0.1234, prompt_tokens=60, prompt_budget=None, triplets_kept=4,
                           decision={"target": "akita_black_bowl_1", "grounding_correct": True},
                           source_stats={"vlm_queries": 3}, extra={"perturbation_applied": "none"})
    assert record_of(through_cdr(record_msg(record))).to_json() == record.to_json()
    failed = dataclasses.replace(record, success=False, infra_failure="RuntimeError: no graph", prompt_tokens=None,
                                 triplets_kept=None)
    assert record_of(through_cdr(record_msg(failed))).to_json() == failed.to_json()


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
    vg = ground_truth_views(s)["agentview"]
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
