"""keyboard_teleop drives the SO101 twin over the hardware topics: keys typed into the node's terminal (a
pseudo-terminal here) move the right joint the right way, the others hold, home goes back, and the terminal is
given back as it was."""

import json
import math
import os
import pty
import signal
import subprocess
import sys
import termios
import time

import pytest

from .conftest import rig_file
from ..waiting import wait_until

pytestmark = [pytest.mark.ros, pytest.mark.sim]

WATCH = """
import json, sys, time, rclpy
from sensor_msgs.msg import JointState
from sgvla_ros.qos import QOS
rclpy.init()
node = rclpy.create_node("watcher")
def keep(m):
    print(json.dumps(dict(zip(m.name, m.position))), flush=True)
node.create_subscription(JointState, "joint_states", keep, QOS["sensor"])
rclpy.spin(node)
"""
STEP = 3.0  # degrees per key press


def test_keys_drive_the_twin(tmp_path, ros_env):
    cameras = [{"name": n, "source": "twin", "device": n, "width": 32, "height": 24, "fps": 5}
               for n in ("agentview", "wrist")]
    rig = rig_file(tmp_path, "twin", cameras=cameras)
    env = {**ros_env, "MUJOCO_GL": "egl"}
    logs = {name: tmp_path / f"{name}.log" for name in ("twin", "keyboard", "joints")}
    master, slave = pty.openpty()
    procs = {}
    try:
        procs["twin"] = subprocess.Popen(
            [sys.executable, "-m", "sgvla_ros.so101_twin", "--ros-args", "-p", f"config:={rig}",
             "-p", "graph_rate_hz:=0.0"], env=env, stdout=logs["twin"].open("w"), stderr=subprocess.STDOUT)
        procs["joints"] = subprocess.Popen([sys.executable, "-c", WATCH], env=env, stdout=logs["joints"].open("w"),
                                           stderr=subprocess.STDOUT)
        procs["keyboard"] = subprocess.Popen(
            [sys.executable, "-m", "sgvla_ros.keyboard_teleop", "--ros-args", "-p", f"step:={STEP}"], env=env,
            stdin=slave, stdout=logs["keyboard"].open("w"), stderr=subprocess.STDOUT)

        def joints() -> dict[str, float]:
            lines = [line for line in logs["joints"].read_text().splitlines() if line.startswith("{")]
            return {j: math.degrees(r) for j, r in json.loads(lines[-1]).items()} if lines else {}

        def moved_by(start: dict, joint: str, degrees: float):
            return lambda: abs(joints()[joint] - start[joint] - degrees) < 2.0

        def others(start: dict, joint: str) -> dict:
            return {j: round(v - start[j], 1) for j, v in joints().items() if j != joint}

        wait_until(lambda: "keys move it now" in logs["keyboard"].read_text() and joints(), 120, "the twin",
                   logs=logs.values())
        start = joints()
        for key, joint, sign in (("d", "elbow_flex", -1), ("q", "shoulder_pan", +1)):
            before = joints()
            for _ in range(5):
                os.write(master, key.encode())
                time.sleep(0.05)
            wait_until(moved_by(before, joint, sign * 5 * STEP), 10, f"{joint} to move {sign * 5 * STEP}",
                       logs=logs.values())
            time.sleep(0.5)  # the others hold still meanwhile
            assert all(abs(d) < 2.0 for d in others(before, joint).values()), (joint, others(before, joint))
        os.write(master, b"x")  # home: back where the arm was when the first key was pressed
        wait_until(lambda: all(abs(v - start[j]) < 2.0 for j, v in joints().items()), 10, "home", logs=logs.values())

        for name in ("keyboard", "twin"):
            procs[name].send_signal(signal.SIGINT)
            assert procs[name].wait(timeout=30) == 0, logs[name].read_text()[-3000:]
            assert "Traceback" not in logs[name].read_text(), logs[name].read_text()[-3000:]
        assert termios.tcgetattr(slave)[3] & termios.ECHO  # cbreak undone: the terminal echoes again
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        os.close(master)
        os.close(slave)
