"""`sgvla record --config twin`: the SO101 MuJoCo twin behind a simulated Feetech bus, driven by LeRobot's own
SO101Follower and the recording loop of the real rig, from a simulated leader (`--sim-leader`)."""

import subprocess
import sys

import numpy as np
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from sgvla.so101.hardware.servo_server import SimServo
from sgvla.so101.hardware.sim_bus import register_table
from sgvla.so101.twin.bus import steps_of, twin_calibration, value_of

from .conftest import rig_file, twin_cameras

pytestmark = pytest.mark.sim


def test_twin_calibration_spans_the_urdf_limits_and_inverts_lerobots_normalization():
    from lerobot.motors import Motor, MotorNormMode
    from lerobot.motors.feetech import FeetechMotorsBus

    from sgvla.so101.hardware.joints import DEFAULT_LIMITS, JOINTS, MOTOR_IDS

    cal = twin_calibration()
    modes = {j: MotorNormMode.RANGE_0_100 if j == "gripper" else MotorNormMode.DEGREES for j in JOINTS}
    bus = FeetechMotorsBus("/dev/null", {j: Motor(MOTOR_IDS[j], "sts3215", modes[j]) for j in JOINTS}, cal)
    for joint in JOINTS:
        low, high = DEFAULT_LIMITS[joint]
        for value in (low, (low + high) / 2, high):
            steps = steps_of(joint, value, cal[joint])
            assert 0 <= steps <= 4095 and cal[joint].range_min <= steps <= cal[joint].range_max
            # LeRobot reads the rounded register back as (nearly) the same position
            read = bus._normalize({MOTOR_IDS[joint]: round(steps)})[MOTOR_IDS[joint]]
            assert read == pytest.approx(value, abs=0.1) and value_of(joint, round(steps), cal[joint]) == read
    assert SimServo(1, register_table()).get("Max_Position_Limit") == 4095


def test_record_from_the_twin_like_from_the_arm(tmp_path):
    cameras = twin_cameras((128, 96), 30)
    rig = rig_file(tmp_path, "twin", cameras=cameras)
    root = tmp_path / "ds"
    proc = subprocess.run([sys.executable, "-m", "sgvla.cli", "record", "--config", str(rig), "--sim-leader",
                           "--root", str(root), "--episodes", "1", "--episode-time", "3", "--reset-time", "0.5",
                           "--auto", "--task-id", "1"], env={**__import__("os").environ, "MUJOCO_GL": "egl"},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    log = "\n".join(line for line in (proc.stdout + proc.stderr).splitlines() if not line.startswith(("Svt", "x265")))
    assert proc.returncode == 0 and "saved 1 episode(s)" in log, log[-4000:]
    ds = LeRobotDataset("local/so101_bowls", root=root)
    n = ds.meta.total_frames
    assert ds.meta.total_episodes == 1 and 75 <= n <= 100, n
    frame = ds[n // 2]
    assert frame["task"] == "pick up the black bowl left of the stove and place it on the stove"  # the twin's
    assert tuple(frame["observation.images.wrist"].shape) == (3, 96, 128)
    assert frame["observation.images.agentview"].std() > 0.02
    state = np.stack([ds[i]["observation.state"].numpy() for i in range(n)])
    action = np.stack([ds[i]["action"].numpy() for i in range(n)])
    err = np.abs(state[3:, :5] - action[:-3, :5])
    print("state ptp", np.ptp(state, axis=0), "median error", np.median(err, axis=0))
    # From its rest pose the twin goes where the leader is, then follows it: the arm really moved.
    assert (np.ptp(state[:, :5], axis=0) > 2.0).all()
    assert np.median(err, axis=0).max() < 8.0
