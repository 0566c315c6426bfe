"""The scene_graph node draws its graphs as `scene_graph/markers`: a real node (its own process) on a loopback-only
domain gets scene states from a probe and the probe receives MarkerArrays: a box and a label per object, an arrow
per triplet of the camera's ground-truth graph with its relation at the middle, the episode's target and place
highlighted, and after the scene changes the arrows of triplets that ended deleted by their ids."""

import json
import subprocess
import sys

import numpy as np
import pytest

from sgvla.nodegraph.markers import OBJECT_COLOR, PLACE_COLOR, TARGET_COLOR

pytestmark = pytest.mark.ros

PROBE = r"""
import json, sys, time
import numpy as np
import rclpy
from rclpy.node import Node
from std_msgs.msg import Header
from visualization_msgs.msg import Marker, MarkerArray
from sgvla_interfaces.msg import SceneState
from sgvla_ros.qos import QOS
from sgvla_ros.state_io import scene_msg
from sgvla.core.state import ground_truth_views
import runpy
scene = runpy.run_path(sys.argv[1])["scene"]  # tests/ros/test_messages.py's four-object scene

rclpy.init()
node = Node("marker_probe")
got = []
node.create_subscription(MarkerArray, "scene_graph/markers", got.append, QOS["reliable"])
pub = node.create_publisher(SceneState, "sim/scene", QOS["control"])
out = {"graphs": []}

def send_until_answered(s, step, timeout_s=120.0):
    # The node draws only while someone subscribes, and it may see this subscription after the first scene: send the
    # scene of the next step until an answer comes.
    before = len(got)
    deadline = time.monotonic() + timeout_s
    while len(got) == before:
        assert time.monotonic() < deadline, f"no MarkerArray within {timeout_s} s of step {step}"
        info = {"goal": ("akita_black_bowl_1", "plate_1"), "table_center": np.zeros(3)}
        pub.publish(scene_msg(s, info, Header(frame_id="world"), 0, step))
        step += 1
        end = time.monotonic() + 0.5
        while len(got) == before and time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)
    out["graphs"].append([list(t) for t in ground_truth_views(s)["agentview"].graph])
    return step

def summary(array):
    return [{"ns": m.ns, "id": m.id, "type": m.type, "action": m.action, "frame": m.header.frame_id,
             "text": m.text, "color": [m.color.r, m.color.g, m.color.b, m.color.a],
             "points": [[p.x, p.y, p.z] for p in m.points],
             "position": [m.pose.position.x, m.pose.position.y, m.pose.position.z]} for m in array.markers]

first = scene()
step = send_until_answered(first, 0)
moved = scene()
moved.positions[3] += [0.0, -0.4, 0.0]  # the cookies go to the other side of the bowls
moved.geoms.centers[0, 4] += [0.0, -0.4, 0.0]
send_until_answered(moved, step)
out["arrays"] = [summary(got[0]), summary(got[-1])]
print(json.dumps(out), flush=True)
"""


def test_scene_graph_node_publishes_the_graph_as_markers(ros_env):
    from pathlib import Path

    node = subprocess.Popen([sys.executable, "-m", "sgvla_ros.scene_graph_node", "--ros-args", "-p",
                             "cameras:=[agentview]", "-p", "ontology:=libero_spatial"],
                            env=ros_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        probe = subprocess.run([sys.executable, "-c", PROBE, str(Path(__file__).with_name("test_messages.py"))], env=ros_env, capture_output=True,
                               text=True, timeout=300)
    finally:
        node.terminate()
        log, _ = node.communicate(timeout=30)
    assert probe.returncode == 0, probe.stdout + probe.stderr + log[-3000:]
    out = json.loads(probe.stdout.strip().splitlines()[-1])
    ADD, DELETE, CUBE, ARROW, TEXT = 0, 2, 1, 0, 9
    for array, graph in zip(out["arrays"], out["graphs"]):
        added = [m for m in array if m["action"] == ADD]
        assert {m["frame"] for m in array} == {"world"}  # the scene's frame
        ns = lambda name: [m for m in added if m["ns"] == f"fiducial/{name}"]  # noqa: E731  (the scene's source)
        cubes, labels = ns("objects"), ns("object_labels")
        assert len(cubes) == len(labels) == 4 and {m["type"] for m in cubes} == {CUBE}
        names = {m["text"] for m in labels}
        assert names == {"akita_black_bowl_1 (target)", "akita_black_bowl_2", "plate_1 (place)", "cookies_1"}
        # each label stands above its object's box: the box's colour says what the object is to the task
        box_of = {label["text"]: next(m for m in cubes if np.allclose(m["position"][:2], label["position"][:2]))
                  for label in labels}
        expected = {"akita_black_bowl_1 (target)": TARGET_COLOR, "plate_1 (place)": PLACE_COLOR,
                    "akita_black_bowl_2": OBJECT_COLOR, "cookies_1": OBJECT_COLOR}
        for text, color in expected.items():
            assert np.allclose(box_of[text]["color"], color, atol=1e-6), (text, box_of[text]["color"])
        target_label = next(m for m in labels if m["text"].endswith("(target)"))
        assert np.allclose(target_label["color"][:3], TARGET_COLOR[:3], atol=1e-6)
        arrows, relations = ns("relations/agentview"), ns("relation_labels/agentview")
        assert len(graph) > 0 and len(arrows) == len(relations) == len(graph)
        assert {m["type"] for m in arrows} == {ARROW} and {m["type"] for m in relations} == {TEXT}
        assert sorted(m["text"] for m in relations) == sorted(r for _, r, _ in graph)
        assert all(len(m["points"]) == 2 for m in arrows)
    first, second = out["arrays"]
    ended = {tuple(t) for t in out["graphs"][0]} - {tuple(t) for t in out["graphs"][1]}
    assert ended, out["graphs"]  # moving the cookies changed the graph
    deleted = [m for m in second if m["action"] == DELETE]
    assert len(deleted) == 2 * len(ended)  # each ended triplet's arrow and its label, by the ids they had
    first_keys = {(m["ns"], m["id"]) for m in first}
    assert {(m["ns"], m["id"]) for m in deleted} <= first_keys
    assert not {(m["ns"], m["id"]) for m in deleted} & {(m["ns"], m["id"]) for m in second if m["action"] == ADD}
