"""The SO101 twin as a LeRobot robot (lerobot_plugins/lerobot_robot_so101_twin): LeRobot's own scripts and classes
drive sgvla's MuJoCo twin.

In process: the features are exactly LeRobot's so101_follower's (built by LeRobot from the same camera sizes); an
observation matches them; send_action clips to the joint limits and to max_relative_target from the present
position, advances physics one control period, and refuses a NaN or an unknown joint; the twin's scripted
pick-and-place, sent through send_action, solves the task and task_success says so.

Through the console scripts: ``python -m lerobot_robot_so101_twin sim-leader`` serves a simulated leader arm, and
``lerobot-record --robot.type=so101_twin --teleop.type=so101_leader --teleop.port=<its pty>`` records two episodes
that LeRobotDataset reloads with the SO101's features."""

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ..waiting import read_until

BIN = Path(sys.executable).parent
W, H = 64, 48
JOINT_KEYS = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos",
              "gripper.pos"]


def make_robot(tmp_path: Path, **options):
    from lerobot.robots.utils import make_robot_from_config
    from lerobot_robot_so101_twin import SO101TwinConfig

    # make_robot_from_config: the path LeRobot's scripts take to a plugin's robot (found by its config's name).
    return make_robot_from_config(SO101TwinConfig(image_width=W, image_height=H, calibration_dir=tmp_path / "cal",
                                                  **options))


def test_features_are_lerobot_so101_followers(tmp_path):
    from lerobot.cameras.opencv import OpenCVCameraConfig
    from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig

    cameras = {name: OpenCVCameraConfig(index_or_path=0, width=W, height=H, fps=30) for name in ("agentview", "wrist")}
    arm = SO101Follower(SO101FollowerConfig(port="/dev/null", cameras=cameras, calibration_dir=tmp_path / "arm"))
    twin = make_robot(tmp_path)
    assert type(twin).__name__ == "SO101Twin" and twin.name == "so101_twin"
    assert list(twin.observation_features.items()) == list(arm.observation_features.items())
    assert list(twin.action_features.items()) == list(arm.action_features.items())
    assert len(twin.cameras) == 2 and twin.is_calibrated and not twin.is_connected
    depth = make_robot(tmp_path, depth=True).observation_features  # the rig's RealSense, as LeRobot names depth
    assert list(depth)[6:] == ["agentview", "agentview_depth", "wrist"] and depth["agentview_depth"] == (H, W, 1)


def test_bad_options_are_refused_before_connecting(tmp_path):
    from lerobot_robot_so101_twin import SO101TwinConfig

    with pytest.raises(ValueError, match="fps"):
        SO101TwinConfig(fps=0)
    with pytest.raises(ValueError, match="image_width"):
        SO101TwinConfig(image_width=4)
    with pytest.raises(ValueError, match="max_relative_target"):
        SO101TwinConfig(max_relative_target={"gripper": 5.0})
    with pytest.raises(ValueError, match="unknown task id 9"):
        make_robot(tmp_path, task_id=9)


def test_observe_act_safely_and_succeed(tmp_path):
    from lerobot.utils.errors import DeviceNotConnectedError

    from sgvla.so101.hardware.joints import DEFAULT_LIMITS, JOINTS, from_radians
    from sgvla.so101.hardware.safety import UnsafeCommand
    from sgvla.so101.twin.config import TARGET
    from sgvla.so101.twin.pick_place import TwinPickPlace

    robot = make_robot(tmp_path, fps=30, max_relative_target=8.0)
    with pytest.raises(DeviceNotConnectedError):
        robot.get_observation()
    robot.connect()
    try:
        obs = robot.get_observation()
        for key, feature in robot.observation_features.items():
            if feature is float:
                assert isinstance(obs[key], float) and math.isfinite(obs[key]), key
            else:
                assert obs[key].shape == feature and obs[key].dtype == np.uint8, key
        assert obs["agentview"].std() > 5  # a rendered scene, not a blank buffer
        assert obs["task_success"] == 0.0 and robot.task_success is False  # undeclared: no dataset feature
        assert "task_success" not in robot.observation_features

        # Far goals: the gripper beyond its 100 % is clipped into the limit, then every goal to 8 from where it is.
        start_time = robot.twin.data.time
        present = {k: obs[k] for k in JOINT_KEYS}
        sent = robot.send_action({"shoulder_pan.pos": present["shoulder_pan.pos"] + 90.0, "gripper.pos": 250.0,
                                  "not_a_joint_value": 1.0})  # as LeRobot's follower: only .pos keys are goals
        assert set(sent) == {"shoulder_pan.pos", "gripper.pos"}
        assert sent["shoulder_pan.pos"] == pytest.approx(present["shoulder_pan.pos"] + 8.0)
        assert sent["gripper.pos"] == pytest.approx(min(DEFAULT_LIMITS["gripper"][1], present["gripper.pos"] + 8.0))
        assert robot.twin.data.time - start_time == pytest.approx(1 / 30, abs=robot.twin.model.opt.timestep)
        moved = robot.get_observation()["shoulder_pan.pos"] - present["shoulder_pan.pos"]
        assert 0.5 < moved <= 8.0 + 0.5  # the joint follows the bounded goal within one control period
        with pytest.raises(UnsafeCommand, match="non-finite"):
            robot.send_action({"elbow_flex.pos": float("nan")})
        with pytest.raises(UnsafeCommand, match="elbow"):
            robot.send_action({"elbow.pos": 0.0})

        # The twin's scripted pick-and-place, through the robot's own (safe) send_action, solves the task.
        expert = TwinPickPlace(robot.twin.model, robot.twin.config, TARGET, robot.layout.place)
        for _ in range(400):
            goal = from_radians(JOINTS, list(expert.act(robot.twin.scene())))
            robot.send_action({f"{j}.pos": v for j, v in goal.items()})
            if robot.task_success:
                break
        assert robot.task_success, "the scripted pick-and-place did not solve the task in 400 steps"
        assert robot.get_observation()["task_success"] == 1.0
        robot.reset(seed=1)
        assert robot.task_success is False and robot.seed == 1
    finally:
        robot.disconnect()
    assert not robot.is_connected


@pytest.mark.integration
def test_lerobot_record_with_the_simulated_leader(tmp_path):
    """The commands of the README: a simulated leader on a pty, lerobot-record from it into a local dataset."""
    from lerobot.datasets import LeRobotDataset

    from sgvla.so101.hardware.joints import DEFAULT_LIMITS, JOINTS

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_LEROBOT_HOME": str(tmp_path / "hf_lerobot"), "MUJOCO_GL": "egl"}
    leader = subprocess.Popen([sys.executable, "-m", "lerobot_robot_so101_twin", "sim-leader", "--calibration-dir",
                               str(tmp_path / "leader")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env)
    try:
        lines = read_until(leader, "Ctrl-C stops", timeout_s=120)
        assert lines and "Ctrl-C stops" in lines[-1], f"the simulated leader did not start:\n{''.join(lines)}"
        port = next(line.split()[-1] for line in lines if line.startswith("leader port:"))
        fps, seconds, root = 15, 2, tmp_path / "dataset"
        record = subprocess.run(
            [str(BIN / "lerobot-record"), "--robot.type=so101_twin", f"--robot.image_width={W}",
             f"--robot.image_height={H}", f"--robot.fps={fps}", "--robot.task_id=0",
             "--teleop.type=so101_leader", f"--teleop.port={port}", "--teleop.id=so101_leader",
             f"--teleop.calibration_dir={tmp_path / 'leader'}",
             "--dataset.repo_id=local/so101_twin_test", f"--dataset.root={root}", f"--dataset.fps={fps}",
             "--dataset.num_episodes=2", f"--dataset.episode_time_s={seconds}", "--dataset.reset_time_s=0",
             "--dataset.single_task=pick up the black bowl on top of the drawer and place it on the stove",
             "--dataset.video=false", "--dataset.push_to_hub=false", "--play_sounds=false"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=240)
        assert record.returncode == 0, f"lerobot-record failed:\n{record.stdout[-3000:]}\n{record.stderr[-5000:]}"
    finally:
        leader.send_signal(signal.SIGINT)
        leader.communicate(timeout=30)
    assert leader.returncode == 0

    dataset = LeRobotDataset("local/so101_twin_test", root=root)
    assert dataset.num_episodes == 2 and dataset.meta.robot_type == "so101_twin" and dataset.fps == fps
    features = dataset.features
    assert features["observation.state"]["names"] == JOINT_KEYS and features["action"]["names"] == JOINT_KEYS
    assert {k for k in features if k.startswith("observation.images.")} == {"observation.images.agentview",
                                                                           "observation.images.wrist"}
    assert features["observation.images.agentview"]["shape"] == (H, W, 3)
    lengths = [int(n) for n in dataset.meta.episodes["length"]]
    # Wall-clock loop: at most fps x duration (+1) frames; fewer only when the loop ran behind on a loaded machine.
    assert all(fps * seconds // 4 <= n <= fps * seconds + 1 for n in lengths), lengths
    assert dataset.num_frames == sum(lengths)
    frames = dataset.hf_dataset.with_format("numpy")
    actions, states = np.stack(frames["action"]), np.stack(frames["observation.state"])
    low, high = np.array([DEFAULT_LIMITS[j] for j in JOINTS]).T
    assert ((actions >= low) & (actions <= high)).all() and np.isfinite(states).all()
    assert np.ptp(actions[:, 0]) > 0.1  # the leader moved, and the actions are its readings
    timestamps = np.asarray(frames["timestamp"], dtype=np.float64)
    index = np.asarray(frames["frame_index"])
    assert np.allclose(timestamps, index / fps, atol=1e-4)
    image = dataset[0]["observation.images.wrist"]
    assert tuple(image.shape) == (3, H, W)  # LeRobot's channel-first tensor of an (h, w, 3) image
