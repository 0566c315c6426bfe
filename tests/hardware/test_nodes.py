"""The hardware nodes with real rclpy over loopback DDS: leader -> follower teleoperation through the
simulated bus, refused and clamped commands, the watchdog hold, a fault, and the camera node."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from sgvla.so101.hardware.sim_bus import STEPS_PER_DEGREE as DEG

from ..waiting import wait_until

pytestmark = pytest.mark.ros

QOS = """
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
COMMANDS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
"""

WATCH_JOINTS = QOS + """
import json, time, rclpy
from sensor_msgs.msg import JointState
from sgvla_ros.qos import QOS
rclpy.init()
node = rclpy.create_node("observer")
seen = {"follower": [], "leader": []}
def keep(key):
    # Follower states count from the leader's first message on: before it, nothing commands the follower
    # (the leader node may start seconds later on a loaded machine).
    return lambda m: (key == "leader" or seen["leader"]) and seen[key].append((list(m.name), list(m.position)))
node.create_subscription(JointState, "joint_states", keep("follower"), QOS["sensor"])
node.create_subscription(JointState, "leader/joint_states", keep("leader"), QOS["sensor"])
deadline = time.monotonic() + 150
while min(len(v) for v in seen.values()) < 45 and time.monotonic() < deadline:
    rclpy.spin_once(node, timeout_sec=0.1)
spans = {k: [max(p[1][j] for p in v) - min(p[1][j] for p in v) for j in range(6)] if v else None
         for k, v in seen.items()}
print(json.dumps({"last": {k: v[-1] if v else None for k, v in seen.items()}, "spans": spans}))
"""

SEND_COMMANDS = QOS + """
import sys, time, rclpy
from sensor_msgs.msg import JointState
rclpy.init()
node = rclpy.create_node("commander")
pub = node.create_publisher(JointState, "joint_commands", COMMANDS)
deadline = time.monotonic() + 60
while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
    time.sleep(0.1)
for _ in range(20):  # 2 s at 10 Hz: elbow far beyond its limit, then a message naming no joint of the arm
    pub.publish(JointState(name=["elbow_flex"], position=[3.0]))
    time.sleep(0.1)
pub.publish(JointState(name=["elbow"], position=[0.0]))
# Reliable: exit once the arm's reader has them all (a loaded machine may take longer than any fixed sleep).
from rclpy.duration import Duration
assert pub.wait_for_all_acked(Duration(seconds=60)), "the arm did not acknowledge the commands"
"""


def node(module: str, *remaps: str, **params) -> list[str]:
    cmd = [sys.executable, "-m", f"sgvla_ros.{module}", "--ros-args"]
    for key, value in params.items():
        cmd += ["-p", f"{key}:={value}"]
    for remap in remaps:
        cmd += ["-r", remap]
    return cmd


def start(cmd, env, log: Path | None = None) -> subprocess.Popen:
    """The node's output piped, or written to ``log`` (a file the test can read while the node runs)."""
    out = subprocess.PIPE if log is None else log.open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    proc.log = log
    return proc


def wait_for_line(log: Path, text: str, timeout_s: float) -> str:
    """The log's text once it holds ``text``."""
    return wait_until(lambda: text in (seen := log.read_text()) and seen, timeout_s, repr(text), logs=[log])


def stop(proc: subprocess.Popen) -> str:
    """End the node; its output (from its log file, for a node started with one)."""
    if proc.poll() is None:
        proc.terminate()
    output = proc.communicate(timeout=30)[0]
    return output if output is not None else proc.log.read_text()


def rig_config(tmp_path, rig, cameras=()) -> str:
    path = tmp_path / "rig.yaml"
    path.write_text(yaml.safe_dump({
        "follower": {"port": rig.follower.port, "id": "so101_follower", "calibration_dir": str(rig.calibration_dir)},
        "leader": {"port": rig.leader.port, "id": "so101_leader", "calibration_dir": str(rig.calibration_dir)},
        "cameras": list(cameras), "control_rate_hz": 30,
        "safety": {"command_timeout_s": 0.3, "joint_limits": {"elbow_flex": [-30.0, 30.0]}}}))
    return str(path)


def why(*facts) -> str:
    """A failure's message, whole (pytest shortens the repr of a tuple): one fact per line."""
    return "\n".join(f if isinstance(f, str) else json.dumps(f) for f in facts)


def follower_registers(rig) -> dict[str, list[int]]:
    """What the follower's servos hold (for a failure's message: torque, goals and positions tell why it did not
    follow)."""
    return {name: [rig.follower.register(i, name) for i in range(1, 7)]
            for name in ("Torque_Enable", "Lock", "Goal_Position", "Present_Position")}


def test_teleoperation_safety_and_fault_through_the_nodes(tmp_path, rig, ros_env):
    config = rig_config(tmp_path, rig)
    leader = start(node("so101_leader", config=config), ros_env)
    arm_log = tmp_path / "follow.log"
    arm = start(node("so101_arm", "joint_commands:=leader/joint_states", config=config), ros_env, arm_log)
    try:
        # The arm follows once DDS has matched it with the leader; on a loaded machine that can come seconds after
        # the leader's states reach the watcher, whose window would then see a follower still holding.
        wait_for_line(arm_log, "following joint_commands", 120)
        watched = subprocess.run([sys.executable, "-c", WATCH_JOINTS], env=ros_env, capture_output=True, text=True,
                                 timeout=200)
        assert watched.returncode == 0, watched.stderr
        seen = json.loads(watched.stdout)
        assert seen["last"]["follower"] and seen["last"]["leader"], why(seen, stop(arm), stop(leader))
        names, follower = seen["last"]["follower"]
        assert names == ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
        # Radians: the follower swings with the leader's +-20 degrees (0.35 rad) over the 1.5 s watched. It trails
        # the leader by its bounded motion per tick (more ticks behind on a loaded machine, so a smaller span in the
        # window: most of the swing, 0.3 rad, is required), but never swings wider than the goals it was given.
        assert max(abs(p) for p in follower[:5]) < 0.4
        for follower_span, leader_span in zip(seen["spans"]["follower"][:5], seen["spans"]["leader"][:5], strict=True):
            assert 0.3 < follower_span < min(0.75, leader_span + 0.1), why(seen["spans"], follower_registers(rig),
                                                                          rig.health(), stop(arm), stop(leader))

        stop(leader)  # the command stream ends: the follower must hold where it is
        time.sleep(1.5)
        for i in range(1, 7):
            assert abs(rig.follower.register(i, "Goal_Position") - rig.follower.register(i, "Present_Position")) <= 2

        # Commands straight to the arm: far out of range, then one naming an unknown joint.
        stop(arm)
        arm_log = tmp_path / "arm.log"
        arm = start(node("so101_arm", config=config), ros_env, arm_log)
        commander = subprocess.run([sys.executable, "-c", SEND_COMMANDS], env=ros_env, capture_output=True,
                                   text=True, timeout=120)
        assert commander.returncode == 0, commander.stderr
        assert rig.follower.register(3, "Goal_Position") == pytest.approx(2048 + 30 * DEG, abs=2)  # the 30 deg limit
        assert "command refused" in wait_for_line(arm_log, "unknown: ['elbow']", 60)  # acknowledged is not handled

        rig.follower.remove(3)
        assert arm.wait(timeout=30) != 0
        log = arm_log.read_text()
        assert "elbow_flex (id 3) stopped answering" in log and "last good state" in log
        assert [rig.follower.register(i, "Torque_Enable") for i in (1, 2, 4, 5, 6)] == [0] * 5
    finally:
        for proc in (leader, arm):
            if proc.poll() is None:
                stop(proc)


WATCH_CAMERA = """
import json, time, rclpy
from sensor_msgs.msg import CameraInfo, Image
from sgvla_ros.qos import QOS
rclpy.init()
node = rclpy.create_node("observer")
got = {}
def keep(topic):
    def cb(m):
        got.setdefault(topic, m)
    return cb
for topic, kind in [("agentview/image_raw", Image), ("agentview/camera_info", CameraInfo),
                    ("agentview/depth/image_raw", Image)]:
    node.create_subscription(kind, topic, keep(topic), QOS["sensor"])
deadline = time.monotonic() + 120
while len(got) < 3 and time.monotonic() < deadline:
    rclpy.spin_once(node, timeout_sec=0.1)
image, info, depth = (got.get(t) for t in ("agentview/image_raw", "agentview/camera_info", "agentview/depth/image_raw"))
print(json.dumps({"image": [image.width, image.height, image.encoding, image.step, image.header.frame_id,
                            len(image.data)],
                  "depth": [depth.encoding, depth.step, bytes(depth.data[:2]).hex()],
                  "k": list(info.k), "frame": info.header.frame_id}))
"""


def test_camera_node_publishes_image_depth_and_camera_info(tmp_path, rig, ros_env):
    camera = {"name": "agentview", "source": "synthetic", "width": 320, "height": 240, "fps": 15, "depth": True,
              "calibration": "agentview"}
    proc = start(node("camera", config=rig_config(tmp_path, rig, [camera]), camera="agentview"), ros_env)
    try:
        watched = subprocess.run([sys.executable, "-c", WATCH_CAMERA], env=ros_env, capture_output=True, text=True,
                                 timeout=150)
    finally:
        log = stop(proc)
    assert watched.returncode == 0, watched.stderr + log
    seen = json.loads(watched.stdout)
    assert seen["image"] == [320, 240, "rgb8", 960, "agentview_optical_frame", 320 * 240 * 3]
    assert seen["depth"][:2] == ["16UC1", 640]
    assert 600 <= int.from_bytes(bytes.fromhex(seen["depth"][2]), "little") <= 900  # millimetres
    assert seen["k"] == [307.5, 0.0, 160.0, 0.0, 307.5, 120.0, 0.0, 0.0, 1.0]  # calibration at 640x480, halved
    assert seen["frame"] == "agentview_optical_frame"


def test_teleop_recorder_node_records_an_episode(tmp_path, rig, ros_env):
    camera = {"name": "agentview", "source": "synthetic", "width": 64, "height": 48, "fps": 30, "depth": True}
    root = tmp_path / "ds"
    proc = subprocess.run(node("teleop_recorder", config=rig_config(tmp_path, rig, [camera]), root=root,
                               task="put the bowl on the stove", episodes=1, episode_time_s=1.0, reset_time_s=0.2,
                               auto_start=True), env=ros_env, capture_output=True, text=True, timeout=200)
    log = "\n".join(line for line in (proc.stdout + proc.stderr).splitlines() if not line.startswith(("Svt", "x265")))
    assert proc.returncode == 0 and "saved 1 episode(s)" in log, why(log, rig.health())
    assert json.loads((root / "meta" / "info.json").read_text())["total_episodes"] == 1
    assert [rig.follower.register(i, "Torque_Enable") for i in range(1, 7)] == [0] * 6  # released on exit
