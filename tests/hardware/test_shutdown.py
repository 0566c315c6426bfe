"""Ctrl-C reaches a launched node more than once (the terminal's process group and the launch): so101_arm on the
simulated bus, alone or with the rest of the hardware launch in one process, still turns torque off on every
servo, exits cleanly and prints no traceback."""

import os
import signal
import subprocess
import sys
import time

import pytest

from .test_nodes import node, rig_config
from ..waiting import wait_until

pytestmark = pytest.mark.ros


def test_repeated_stop_signals_never_cut_torque_off_short(tmp_path, rig, ros_env):
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    arm = subprocess.Popen(node("so101_arm", config=rig_config(tmp_path, rig)), env=ros_env, stdout=out.open("w"),
                           stderr=err.open("w"))
    try:
        # "follower on" comes first, with torque still off
        wait_until(lambda: "active: torque on" in err.read_text(), 60, "torque on", logs=[err], procs=[arm])
        assert all(rig.follower.register(i, "Torque_Enable") == 1 for i in range(1, 7))
        time.sleep(0.5)  # spinning: control ticks read and write the bus
        # The first signal starts the shutdown; the others (every 2 ms until the node is gone) land in callbacks,
        # in destroy_node's torque-off and after it.
        signals = 0
        while arm.poll() is None and signals < 5000:
            arm.send_signal(signal.SIGTERM if signals % 3 == 2 else signal.SIGINT)
            signals += 1
            time.sleep(0.002)
        code = arm.wait(timeout=30)
    finally:
        if arm.poll() is None:
            os.kill(arm.pid, signal.SIGKILL)
            arm.wait()
    log = out.read_text() + err.read_text()
    assert code == 0, log[-3000:]
    assert signals > 2, signals  # the node was still there for the second signal and more
    assert [rig.follower.register(i, "Torque_Enable") for i in range(1, 7)] == [0] * 6, log[-3000:]
    assert "Traceback" not in log and "RCLError" not in log, log[-3000:]


def test_single_process_hardware_launch_turns_torque_off_on_ctrl_c(tmp_path, rig, ros_env, ros_domain_id):
    """Arm, leader and both cameras in one process (`--single-process`): Ctrl-C, pressed twice, reaches it from
    the terminal and from the launcher; torque still ends off."""
    cameras = [{"name": n, "source": "synthetic", "width": 32, "height": 24, "fps": 10} for n in ("agentview", "wrist")]
    log = tmp_path / "launch.log"
    launch = subprocess.Popen([sys.executable, "-m", "sgvla.cli", "launch", "hardware", "teleop=leader",
                               f"config={rig_config(tmp_path, rig, cameras)}", "--single-process",
                               "--domain-id", str(ros_domain_id)],
                              env=ros_env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: all(s in log.read_text() for s in ("active: torque on", "leader on", "camera agentview",
                                                              "camera wrist")), 90, "the rig", logs=[log],
                   procs=[launch])
        assert all(rig.follower.register(i, "Torque_Enable") == 1 for i in range(1, 7))
        time.sleep(1.0)  # teleoperating
        for _ in range(2):  # Ctrl-C pressed twice in the launch's terminal
            os.killpg(launch.pid, signal.SIGINT)
            time.sleep(0.01)
        code = launch.wait(timeout=60)
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)
            launch.wait()
    text = log.read_text()
    assert "4 nodes in one process" in text and code == 130, text[-3000:]
    assert [rig.follower.register(i, "Torque_Enable") for i in range(1, 7)] == [0] * 6, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
