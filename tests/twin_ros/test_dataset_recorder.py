"""dataset_recorder alone over loopback DDS: joint states, commands and camera images published by a test
participant; episodes by record_control (start, save, abort), LeRobot units in the dataset, a malformed
command ignored, and silent joint states ending the node with a clear message."""

import json
import subprocess
import sys

import numpy as np
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from .conftest import rig_file

pytestmark = pytest.mark.ros

PUBLISH = """
import sys, time, numpy as np, rclpy
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String
from sgvla_ros.qos import QOS
plan = sys.argv[1]
rclpy.init()
node = rclpy.create_node("rig")
states = node.create_publisher(JointState, "joint_states", QOS["sensor"])
commands = node.create_publisher(JointState, "joint_commands", QOS["commands"])
control = node.create_publisher(String, "record_control", QOS["reliable"])
images = {t: node.create_publisher(Image, t, QOS["sensor"])
          for t in ("agentview/image_raw", "agentview/depth/image_raw", "wrist/image_raw")}
names = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
deadline = time.monotonic() + 120
while commands.get_subscription_count() == 0 and time.monotonic() < deadline:
    time.sleep(0.1)
def image(encoding, channels, dtype, value, stamp):
    msg = Image(height=24, width=32, encoding=encoding, step=32 * channels * np.dtype(dtype).itemsize,
                data=np.full((24, 32, channels), value, dtype).tobytes())
    msg.header.stamp = stamp
    return msg
events = {"episodes": [(1.0, "start"), (2.0, "save"), (2.5, "start"), (3.0, "abort"), (3.5, "start"), (4.5, "save")],
          "silence": [(1.0, "start")]}[plan]
start, k = time.monotonic(), 0
while time.monotonic() - start < 8.0:
    t = time.monotonic() - start
    stamp = node.get_clock().now().to_msg()
    pan = 0.1 + 0.05 * t  # radians
    if plan == "episodes" or t < 2.0:  # "silence": the arm node goes quiet after 2 s
        states.publish(JointState(name=names, position=[pan, 0.0, 0.0, 0.0, 0.0, 1.74533]))
    commands.publish(JointState(name=names, position=[pan + 0.05, 0.0, 0.0, 0.0, 0.0, -0.174533]))
    if k == 10:
        commands.publish(JointState(name=["elbow"], position=[0.0]))  # not a joint of the arm
    if k % 3 == 0:  # cameras at 10 Hz
        images["agentview/image_raw"].publish(image("rgb8", 3, np.uint8, k % 250, stamp))
        images["agentview/depth/image_raw"].publish(image("16UC1", 1, np.uint16, 700, stamp))
        images["wrist/image_raw"].publish(image("rgb8", 3, np.uint8, 50, stamp))
    while events and t >= events[0][0]:
        control.publish(String(data=events.pop(0)[1]))
    k += 1
    time.sleep(1 / 30)
"""


def recorder(rig, root, env, episodes):
    return subprocess.Popen([sys.executable, "-m", "sgvla_ros.dataset_recorder", "--ros-args", "-p", f"config:={rig}",
                             "-p", f"root:={root}", "-p", "task:=hold still", "-p", f"episodes:={episodes}",
                             "-p", "input_timeout_s:=1.0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_dataset_recorder_episodes_units_and_faults(tmp_path, ros_env):
    cameras = [{"name": "agentview", "source": "synthetic", "width": 32, "height": 24, "fps": 10, "depth": True},
               {"name": "wrist", "source": "synthetic", "width": 32, "height": 24, "fps": 10}]
    rig = rig_file(tmp_path, "synthetic", cameras=cameras)
    root = tmp_path / "ds"
    rec = recorder(rig, root, ros_env, episodes=2)
    pub = subprocess.run([sys.executable, "-c", PUBLISH, "episodes"], env=ros_env, capture_output=True, text=True,
                         timeout=200)
    log = rec.communicate(timeout=120)[0]
    assert pub.returncode == 0, pub.stderr
    assert rec.returncode == 0 and "saved 2 episode(s)" in log and "discarded 1" in log, log[-3000:]
    assert "joint_commands: joint names ['elbow']" in log  # refused with a message, the node went on

    ds = LeRobotDataset("local/so101_bowls", root=root)
    lengths = [int(e["length"]) for e in ds.meta.episodes]
    assert ds.meta.total_episodes == 2 and 24 <= lengths[0] <= 36 and 24 <= lengths[1] <= 36, lengths  # 1 s at 30 Hz
    state = np.stack([ds[i]["observation.state"].numpy() for i in range(len(ds))])
    action = np.stack([ds[i]["action"].numpy() for i in range(len(ds))])
    assert np.median(action[:, 0] - state[:, 0]) == pytest.approx(np.degrees(0.05), abs=0.5)  # radians -> degrees
    assert np.allclose(state[:, 5], 100.0, atol=0.01) and np.allclose(action[:, 5], 0.0, atol=0.01)  # gripper %
    frame = ds[3]
    assert tuple(frame["observation.images.agentview"].shape) == (3, 24, 32) and frame["task"] == "hold still"

    rec = recorder(rig, root, ros_env, episodes=1)  # the same dataset: appended to
    pub = subprocess.run([sys.executable, "-c", PUBLISH, "silence"], env=ros_env, capture_output=True, text=True,
                         timeout=200)
    log = rec.communicate(timeout=120)[0]
    assert pub.returncode == 0, pub.stderr
    assert rec.returncode == 1 and "joint_states: no message for 1 s" in log, log[-3000:]
    assert json.loads((root / "meta" / "info.json").read_text())["total_episodes"] == 2  # nothing half-written
