"""dataset_recorder alone over loopback DDS: joint states, commands and camera images published by a test
participant; episodes by record_control (start, save, abort), LeRobot units in the dataset, a malformed
command ignored, and silent joint states ending the node with a clear message."""

import json
import queue
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from .conftest import rig_file

pytestmark = pytest.mark.ros

PUBLISH = """
import select, sys, time, numpy as np, rclpy
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String
from sgvla_ros.qos import QOS
rclpy.init()
node = rclpy.create_node("rig")
states = node.create_publisher(JointState, "joint_states", QOS["sensor"])
commands = node.create_publisher(JointState, "joint_commands", QOS["commands"])
control = node.create_publisher(String, "record_control", QOS["reliable"])
images = {t: node.create_publisher(Image, t, QOS["sensor"])
          for t in ("agentview/image_raw", "agentview/depth/image_raw", "wrist/image_raw")}
names = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
def image(encoding, channels, dtype, value, stamp):
    msg = Image(height=24, width=32, encoding=encoding, step=32 * channels * np.dtype(dtype).itemsize,
                data=np.full((24, 32, channels), value, dtype).tobytes())
    msg.header.stamp = stamp
    return msg
# The rig publishes at 30 Hz until told to end; the test sends record_control commands (and "silence": the arm
# goes quiet) through stdin when the recorder's log shows it is ready for them, whatever the machine's load.
# A record_control command waits until good commands flow again after a "bad" window: while the bad command is
# alone on the topic no valid command arrives, and once that lasts the rig's command_timeout_s (a loaded machine
# stretches the window's ticks) the recorder rightly records the arm holding (action = state) for those ticks.
start, k, quiet, bad_until, pending = time.monotonic(), 0, False, -1, []
while True:
    if select.select([sys.stdin], [], [], 0)[0]:
        line = sys.stdin.readline().strip()
        if line in ("", "end"):
            break
        if line == "silence":
            quiet = True
        elif line == "bad":  # a command naming a joint the arm does not have, alone on the topic for a while
            bad_until = k + 6  # (its QoS keeps only the newest command: the next good one would replace it)
        else:
            pending.append(line)
    if k >= bad_until + 3:  # three good commands sent since the bad window
        for line in pending:
            control.publish(String(data=line))
        pending = []
    t = time.monotonic() - start
    stamp = node.get_clock().now().to_msg()
    pan = 0.1 + 0.05 * t  # radians
    if not quiet:
        states.publish(JointState(name=names, position=[pan, 0.0, 0.0, 0.0, 0.0, 1.74533]))
    if k < bad_until:
        commands.publish(JointState(name=["elbow"], position=[0.0]))
    else:
        commands.publish(JointState(name=names, position=[pan + 0.05, 0.0, 0.0, 0.0, 0.0, -0.174533]))
    if k % 3 == 0:  # cameras at 10 Hz
        images["agentview/image_raw"].publish(image("rgb8", 3, np.uint8, k % 250, stamp))
        images["agentview/depth/image_raw"].publish(image("16UC1", 1, np.uint16, 700, stamp))
        images["wrist/image_raw"].publish(image("rgb8", 3, np.uint8, 50, stamp))
    k += 1
    time.sleep(1 / 30)
"""


class Session:
    """The recorder's log, read by a thread line by line; `until` waits for a line, `send` is a command to the rig
    publisher. Waits are bounded whatever either process does (a silent recorder, a publisher that died)."""

    def __init__(self, rec: subprocess.Popen, pub: subprocess.Popen):
        self.rec, self.pub, self.lines, self.since = rec, pub, [], 0
        self.queue: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.rec.stdout:
            self.queue.put(line)
        self.queue.put("")  # end of the recorder's output

    def log(self) -> str:
        return "".join(self.lines[-40:]) + (f"\nrig publisher: {self.pub.stderr.read()}" if self.pub.poll() else "")

    def until(self, text: str, timeout_s: float = 120.0) -> None:
        """Wait for a log line holding `text`, after the last command sent."""
        deadline = time.monotonic() + timeout_s
        while not any(text in line for line in self.lines[self.since:]):
            assert self.pub.poll() is None, f"the rig publisher ended before {text!r}:\n{self.log()}"
            try:
                line = self.queue.get(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
            except queue.Empty:
                assert time.monotonic() < deadline, f"no {text!r} from the recorder in {timeout_s} s:\n{self.log()}"
                continue
            assert line, f"the recorder ended before {text!r}:\n{self.log()}"
            self.lines.append(line)

    def send(self, command: str, then: str | None = None, hold_s: float = 0.0) -> None:
        self.since = len(self.lines)
        self.pub.stdin.write(command + "\n")
        self.pub.stdin.flush()
        if then:
            self.until(then)
        time.sleep(hold_s)

    def finish(self) -> str:
        try:
            self.rec.wait(timeout=120)
        finally:
            self.send("end")
            assert self.pub.wait(timeout=60) == 0, self.pub.stderr.read()
        self.reader.join(timeout=10)
        while not self.queue.empty():
            self.lines.append(self.queue.get())
        return "".join(self.lines)

    def kill(self) -> None:
        for proc in (self.rec, self.pub):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def session(ros_env):
    """Start a recorder and the rig publisher; both are killed at teardown if a test failed half way."""
    started = []

    def start(rig, root, episodes) -> Session:
        rec = recorder(rig, root, ros_env, episodes)
        pub = subprocess.Popen([sys.executable, "-c", PUBLISH], env=ros_env, stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started.append(Session(rec, pub))
        return started[-1]

    yield start
    for s in started:
        s.kill()


def recorder(rig, root, env, episodes):
    return subprocess.Popen([sys.executable, "-m", "sgvla_ros.dataset_recorder", "--ros-args", "-p", f"config:={rig}",
                             "-p", f"root:={root}", "-p", "task:=hold still", "-p", f"episodes:={episodes}",
                             "-p", "input_timeout_s:=1.0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_dataset_recorder_episodes_units_and_faults(tmp_path, session):
    cameras = [{"name": "agentview", "source": "synthetic", "width": 32, "height": 24, "fps": 10, "depth": True},
               {"name": "wrist", "source": "synthetic", "width": 32, "height": 24, "fps": 10}]
    rig = rig_file(tmp_path, "synthetic", cameras=cameras)
    root = tmp_path / "ds"
    s = session(rig, root, episodes=2)
    rec = s.rec
    s.until("inputs ready")
    s.send("bad", "joint_commands: joint names ['elbow']")  # refused with a message, the node goes on
    s.send("start", "episode 0: recording", hold_s=1.0)
    s.send("save", "episode 0: saved")
    s.send("start", "episode 1: recording", hold_s=0.3)
    s.send("abort", "episode 1: discarded")
    s.send("start", "episode 1: recording", hold_s=1.0)
    s.send("save")
    log = s.finish()
    assert rec.returncode == 0 and "saved 2 episode(s)" in log and "discarded 1" in log, log[-3000:]

    ds = LeRobotDataset("local/so101_bowls", root=root)
    lengths = [int(e["length"]) for e in ds.meta.episodes]
    # About 1 s at 30 Hz each; fewer ticks when the machine is loaded, never more.
    assert ds.meta.total_episodes == 2 and all(10 <= n <= 40 for n in lengths), lengths
    state = np.stack([ds[i]["observation.state"].numpy() for i in range(len(ds))])
    action = np.stack([ds[i]["action"].numpy() for i in range(len(ds))])
    assert np.median(action[:, 0] - state[:, 0]) == pytest.approx(np.degrees(0.05), abs=0.5)  # radians -> degrees
    assert np.allclose(state[:, 5], 100.0, atol=0.01) and np.allclose(action[:, 5], 0.0, atol=0.01)  # gripper %
    frame = ds[3]
    assert tuple(frame["observation.images.agentview"].shape) == (3, 24, 32) and frame["task"] == "hold still"

    s = session(rig, root, episodes=1)  # the same dataset: appended to
    rec = s.rec
    s.until("inputs ready")
    s.send("start", "episode 2: recording", hold_s=0.5)
    s.send("silence")  # the arm node goes quiet: the recorder ends with a clear message
    log = s.finish()
    assert rec.returncode == 1 and "joint_states: no message for 1 s" in log, log[-3000:]
    assert json.loads((root / "meta" / "info.json").read_text())["total_episodes"] == 2  # nothing half-written
