"""The round trip: `sgvla launch hardware sim=true` (the SO101 twin on the hardware topics, its dataset_recorder
ending the launch after one short episode) with sgvla's bag_recorder beside it on the same loopback domain and a
process sweeping the arm's goals on joint_commands -> `sgvla bag2dataset` with config/contracts/hardware.yaml ->
LeRobotDataset. Every frame's state is the twin's logged joint state (the bag's /joint_states) newest at or before
the frame's tick, in LeRobot's units (so within the tick: the next logged state is after it), never a later one,
and the frames whose state is older than the contract's 2 ticks are the ones the report counts late."""

import json
import math
import signal
import subprocess
import sys

import numpy as np
import pytest
import yaml
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from sgvla.nodegraph.bag import read_bag
from sgvla.paths import REPO_ROOT
from sgvla.so101.hardware.joints import JOINTS, from_radians

from ..waiting import wait_until

pytestmark = pytest.mark.ros

NS = 1_000_000_000
FPS = 30

# Goals on joint_commands while the twin listens, as a tool would send them: the body joints swing about the middle
# (radians), stamped.
COMMANDER = """
import math, signal, time
import rclpy
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
rclpy.init()
node = rclpy.create_node("sweep_commands")
qos = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                 durability=DurabilityPolicy.VOLATILE)
pub = node.create_publisher(JointState, "joint_commands", qos)
names = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
running = [True]
signal.signal(signal.SIGINT, lambda *_: running.__setitem__(0, False))
while running[0] and pub.get_subscription_count() == 0:  # from the twin's start to its end: the bag's one episode
    time.sleep(0.05)
start = time.monotonic()
print("commanding", flush=True)
while running[0] and pub.get_subscription_count() > 0:
    t = time.monotonic() - start
    msg = JointState(name=names, position=[0.5 * math.sin(2 * math.pi * 0.25 * t)] * 5 + [0.3])
    msg.header.stamp = node.get_clock().now().to_msg()
    pub.publish(msg)
    time.sleep(1 / 30)
node.destroy_node()
rclpy.try_shutdown()
"""


def twin_rig(tmp_path):
    data = yaml.safe_load((REPO_ROOT / "config/hardware/twin.yaml").read_text())
    data["cameras"] = [{"name": "agentview", "source": "twin", "device": "agentview", "width": 64, "height": 48,
                        "fps": FPS},
                       {"name": "wrist", "source": "twin", "device": "wrist", "width": 64, "height": 48, "fps": FPS}]
    path = tmp_path / "twin_rig.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def stop(proc, timeout=60):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def test_a_twin_launch_bag_becomes_a_dataset_of_its_joint_states(tmp_path, ros_env, ros_domain_id):
    bag, out = tmp_path / "bag", tmp_path / "ds"
    env = {**ros_env, "MUJOCO_GL": "egl"}
    logs = {name: tmp_path / f"{name}.log" for name in ("recorder", "commander", "launch")}
    files = {name: path.open("w") for name, path in logs.items()}
    recorder = subprocess.Popen([sys.executable, "-m", "sgvla_ros.bag_recorder", "--ros-args", "-p",
                                 f"output:={bag}"], env=env, stdout=files["recorder"], stderr=subprocess.STDOUT)
    commander = launch = None
    try:
        wait_until(lambda: "recording into" in logs["recorder"].read_text(), 120, "bag_recorder's start",
                   logs=[logs["recorder"]], procs=[recorder])
        (tmp_path / "commander.py").write_text(COMMANDER)
        commander = subprocess.Popen([sys.executable, str(tmp_path / "commander.py")], env=env,
                                     stdout=files["commander"], stderr=subprocess.STDOUT)
        launch = subprocess.Popen(
            [sys.executable, "-m", "sgvla.cli", "launch", "hardware", "sim=true", f"config={twin_rig(tmp_path)}",
             f"record={tmp_path / 'recorded'}", "episodes=1", "episode_time_s=1", "reset_time_s=0",
             "auto_start=true", "--domain-id", str(ros_domain_id), "--share-domain"],  # with the recorder
            env=env, stdout=files["launch"], stderr=subprocess.STDOUT)
        assert launch.wait(timeout=300) == 0, logs["launch"].read_text()[-4000:]
    finally:
        for proc in (launch, commander):
            if proc is not None:
                stop(proc)
        code = stop(recorder)
        for f in files.values():
            f.close()
    text = logs["recorder"].read_text()
    assert code == 0 and "wrote" in text, text[-3000:]

    proc = subprocess.run([sys.executable, "-m", "sgvla.cli", "bag2dataset", str(bag), "--contract", "hardware",
                           "--out", str(out), "--repo-id", "test/twin", "features.action.topic=/joint_commands",
                           "late=keep", "episodes.by=bag"], env=env, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    print(log[-2500:])
    report = json.loads((out / "bag2dataset_report.json").read_text())
    assert len(report["episodes"]) == 1 and report["episodes"][0]["saved"], report["episodes"]
    episode = report["episodes"][0]

    # The twin's logged joint states, read from the bag on their own: header stamps, LeRobot units.
    stamps, states, task = [], [], None
    for topic, _, msg in read_bag(bag, ["/joint_states", "/task"]):
        if topic == "/task":
            task = msg.data
            continue
        stamps.append(msg.header.stamp.sec * NS + msg.header.stamp.nanosec)
        by_name = from_radians(list(msg.name), list(msg.position))
        states.append([by_name[j] for j in JOINTS])
    order = np.argsort(stamps, kind="stable")
    stamps, states = np.asarray(stamps)[order], np.asarray(states)[order]

    ds = LeRobotDataset("test/twin", root=out)
    n = ds.meta.total_frames
    assert ds.meta.total_episodes == 1 and n == episode["frames"] > 2 * FPS, (n, episode)  # seconds of the run
    frame = ds[n // 2]
    assert frame["task"] == task and tuple(frame["observation.images.wrist"].shape) == (3, 48, 64)
    got = np.stack([ds[i]["observation.state"].numpy() for i in range(n)])
    first = episode["start_ns"] + episode["skipped_waiting"] * NS // FPS
    tick = np.array([episode["start_ns"] + (i + episode["skipped_waiting"]) * NS // FPS for i in range(n)])
    assert tick[0] == first
    newest = np.searchsorted(stamps, tick, side="right") - 1  # at or before the tick
    assert (newest >= 0).all()
    np.testing.assert_allclose(got, states[newest], atol=1e-3)  # float32 of the same message
    assert (stamps[newest] <= tick).all()  # never a later one
    later = np.minimum(newest + 1, len(stamps) - 1)
    assert ((stamps[later] > tick) | (newest == len(stamps) - 1)).all()  # and the newest one
    age = (tick - stamps[newest]) / NS
    late = report["features"]["observation.state"]["late"]
    assert (age > 2 / FPS).sum() == late  # what the report calls late: older than the contract's 2 ticks
    # How old the values are depends on the twin keeping its 30 Hz on this machine (a loaded one stalls it for a
    # second now and then): reported, not asserted.
    print("age of the frames' joint states (ms), p50 p90 p99:", np.percentile(age, [50, 90, 99]) * 1000)
    # The sweep moved the arm: the frames are the run, not a still arm.
    assert np.ptp(got[:, :5], axis=0).max() > 5.0, np.ptp(got, axis=0)
    action = np.stack([ds[i]["action"].numpy() for i in range(n)])
    assert np.abs(action[:, :5]).max() <= math.degrees(0.5) + 1e-3

