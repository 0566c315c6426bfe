"""A prompt-grounded episode of the so101_hardware suite with perception (issue 15.6), over real rclpy on loopback,
with the twin standing in for the arm and its cameras: so101_twin publishes joint states and camera images only (no
ground-truth graphs: graph_rate_hz 0), fiducial_graphs perceives the objects, arm_policy runs the operator's
protocol and the episode in graph mode (scene_graph): the prompt carries the perceived agent-view graph and the
policy grounds its target among the perceived objects, then drives the arm with the pick-and-place controller."""

import json
import re
import subprocess
import sys

import pytest

from sgvla.scene_graph.serialize import CONTEXT_HEADER

from .conftest import rig_file, twin_cameras

pytestmark = [pytest.mark.ros, pytest.mark.sim]

DRIVE = """
import json, sys, time, rclpy
from rclpy.action import ActionClient
from sensor_msgs.msg import JointState
from std_msgs.msg import Int64, String
from sgvla_interfaces.action import RunEpisode
from sgvla_interfaces.msg import ObjectStates
from sgvla_ros.qos import QOS
from sgvla_ros.state_io import key_values, record_of
from sgvla.so101.hardware.joints import JOINTS, from_radians
from sgvla.so101.twin.config import load_twin_config
rclpy.init()
node = rclpy.create_node("driver")
lines, first = [], {}
node.create_subscription(String, "eval/operator", lambda m: lines.append(m.data), QOS["latched"])
node.create_subscription(JointState, "joint_states", lambda m: first.setdefault("joints", dict(zip(m.name, m.position))),
                         QOS["sensor"])
confirm = node.create_publisher(String, "eval/confirm", QOS["reliable"])
reset = node.create_publisher(Int64, "twin/reset", QOS["reliable"])
perceived = {}
node.create_subscription(ObjectStates, "perception/objects", lambda m: perceived.__setitem__("last", m), QOS["reliable"])
SCENE = {"black_bowl_1", "black_bowl_2", "black_stove"}  # task 2's objects
SETTLE_NS = 3 * 10**9  # an image is stamped when published, up to a render (over a second here) after its scene
def scene_perceived(since_ns):  # perception/objects of images of the scene after since_ns (ROS time) shows them all
    m = perceived.get("last")
    return (m is not None and m.header.stamp.sec * 10**9 + m.header.stamp.nanosec > since_ns + SETTLE_NS
            and SCENE <= {o.name for o in m.objects})
verdict = node.create_publisher(String, "eval/verdict", QOS["reliable"])
client = ActionClient(node, RunEpisode, "run_episode")
assert client.wait_for_server(timeout_sec=120), "arm_policy did not come up"
rest = load_twin_config().rest_pose
home = from_radians(list(JOINTS), [rest.get(j, 0.0) for j in JOINTS])
end = time.monotonic() + float(sys.argv[1])  # fiducial_graphs perceives the first frames meanwhile
while time.monotonic() < end:
    rclpy.spin_once(node, timeout_sec=0.05)
seen = []
for episode, mode in enumerate(sys.argv[2].split(","), start=1):  # one goal per mode, one after the other
    goal = RunEpisode.Goal(episode=episode, policy="prompt_grounded", policy_type="prompt_grounded", task_id=2,
                           perturbation="none", mode=mode, seed=0, view="agentview", context_style="reference",
                           graph_source="fiducial", max_steps=20, suite="so101_hardware",
                           suite_options=key_values({"perception": True, "home": home, "home_tolerance_deg": 6.0,
                                                     "episode_time_s": 2.0, "verdict_window_s": 0.5}))
    del lines[:]
    future = client.send_goal_async(goal)
    answered = set()
    result = None
    set_at = None
    deadline = time.monotonic() + 240
    while result is None and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
        for line in lines:
            if line.startswith("confirm") and "confirm" not in answered and set_at is None:
                # As an operator does: set the scene (the twin places the objects again, the arm at rest), and
                # confirm once it is seen. Confirming at once, the first step could be given a perception of frames
                # from the previous episode or the way home (a frame can take over a second here).
                set_at = node.get_clock().now().nanoseconds
                if sys.argv[3] == "perceived":
                    reset.publish(Int64(data=0))
        if set_at is not None and "confirm" not in answered and (sys.argv[3] != "perceived" or scene_perceived(set_at)):
            answered.add("confirm"); confirm.publish(String(data="start"))
        for line in lines:
            if line.startswith("verdict") and "verdict" not in answered:
                answered.add("verdict"); verdict.publish(String(data="failure scripted operator"))
        if future.done() and "result" not in answered:
            answered.add("result"); result_future = future.result().get_result_async()
        if "result" in answered and result_future.done():
            result = result_future.result().result
    moved = {}
    sub = node.create_subscription(JointState, "joint_states",
                                   lambda m: moved.__setitem__("joints", dict(zip(m.name, m.position))), QOS["sensor"])
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    node.destroy_subscription(sub)
    start_joints = first["joints"]  # the first joint state the driver saw (the wait above may be too short for it)
    record = record_of(result.record)
    seen.append({"mode": mode, "lines": list(lines), "infra": record.infra_failure, "steps": record.steps,
                 "failure_reason": record.failure_reason,
                 "prompt": record.prompt, "graph_source": record.graph_source, "decision": record.decision,
                 "control": record.control,
                 "moved": max(abs(moved["joints"][j] - start_joints[j]) for j in start_joints)})
print(json.dumps(seen))
"""


def drive(tmp_path, ros_env, nodes: list[tuple[str, list[str]]], wait_s: float,
          modes: tuple[str, ...] = ("scene_graph",)) -> tuple[list[dict], str]:
    """The twin, the given nodes and the DRIVE operator (after ``wait_s``), one episode per mode in one launch; what
    it saw of each, and the nodes' logs."""
    rig = rig_file(tmp_path, "twin", cameras=twin_cameras((320, 240), 10))
    env = {**ros_env, "MUJOCO_GL": "egl"}
    config = ["--ros-args", "-p", f"config:={rig}"]
    procs = [subprocess.Popen([sys.executable, "-m", f"sgvla_ros.{module}", *config, *extra], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for module, extra in [("so101_twin", ["-p", "task_id:=2", "-p", "graph_rate_hz:=0.0"]), *nodes]]
    try:
        perceived = "perceived" if any(module == "fiducial_graphs" for module, _ in nodes) else "blind"
        driven = subprocess.run([sys.executable, "-c", DRIVE, str(wait_s), ",".join(modes), perceived], env=env,
                                capture_output=True, text=True, timeout=400)
    finally:
        logs = []
        for proc in reversed(procs):
            proc.terminate()
            logs.append(proc.communicate(timeout=60)[0])
    log = "\n".join(entry[-2500:] for entry in logs)
    assert driven.returncode == 0, driven.stderr[-3000:] + log
    return json.loads(driven.stdout), log


def test_prompt_grounded_episode_on_the_arm_grounds_on_perceived_objects(tmp_path, ros_env):
    """The graph mode, then the wrong_graph control in the same launch (issue 31: controls run on the arm too): the
    control's graph, built from the perceived graph with the target's identity moved to the other bowl, sends the
    same policy to the wrong bowl, and its record says what it showed."""
    # The twin renders its cameras at a low priority: on a loaded 2-core machine a frame (and so a perceived graph)
    # can take over a second, which on the arm would be an infrastructure failure (the next test): beside two busy
    # processes the rollouts' agentview image was once 1 s old at the first step (image_timeout_s).
    seen, log = drive(tmp_path, ros_env, [("fiducial_graphs", ["-p", "rate_hz:=5.0"]),
                                          ("arm_policy", ["-p", "keyboard:=false", "-p", "perception_timeout_s:=5.0",
                                                          "-p", "image_timeout_s:=5.0"])],
                      15, modes=("scene_graph", "wrong_graph"))
    graph, wrong = seen
    print(json.dumps([{k: s[k] for k in ("mode", "steps", "failure_reason", "graph_source", "decision", "control",
                                                "moved")}
                      for s in seen]))
    for episode in seen:
        assert episode["infra"] == "", episode["mode"] + ": " + episode["infra"] + log
        assert episode["graph_source"] == "fiducial" and CONTEXT_HEADER in episode["prompt"], episode["prompt"]
        assert episode["decision"]["grounding_source"] == "scene_graph", episode["decision"]
        assert episode["steps"] >= 10 and episode["moved"] > 0.02  # radians: the controller drove the arm
    assert graph["decision"]["grounding_correct"] is True and graph["control"] == {}, graph
    assert wrong["decision"]["grounding_correct"] is False, wrong["decision"]
    assert wrong["control"]["kind"] == "wrong_graph" and wrong["control"]["shown"] >= 1, wrong["control"]
    assert wrong["control"]["swapped"] == "black_bowl_1<->black_bowl_2", wrong["control"]


def test_no_perception_is_an_infrastructure_failure_not_a_result(tmp_path, ros_env):
    """Without fiducial_graphs nothing is perceived: the episode is an infrastructure failure naming the missing
    topic (excluded from success rates, retried), not a policy failure. Images may be 5 s old, as in the test
    above: the twin renders at a low priority, and on the loaded 2-core machine (make test's other worker) the
    agentview image was once over 1 s old at the first step, which failed this episode for the image first (an
    infrastructure failure too, but not the one under test)."""
    (seen,), log = drive(tmp_path, ros_env, [("arm_policy", ["-p", "keyboard:=false", "-p", "image_timeout_s:=5.0"])], 1)
    assert re.fullmatch(r"InfrastructureFailure: no (scene_graph/agentview|perception/objects) within perception_timeout_s=1 .*"
                        r"is fiducial_graphs running.*", seen["infra"]), seen["infra"] + log
