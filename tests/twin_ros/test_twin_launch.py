"""Done when: `sgvla launch hardware sim=true teleop=leader record=DIR` teleoperates the SO101 MuJoCo twin
from a (simulated) leader arm over the hardware topics and records a LeRobot dataset in which the twin's
joints follow the leader's."""

import numpy as np
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from .conftest import rig_file, sgvla_launch, twin_cameras

pytestmark = [pytest.mark.ros, pytest.mark.sim]

SIZE = (96, 128)  # rendered on the CPU: small images keep the camera rate up


def test_twin_teleoperated_from_the_leader_and_recorded(tmp_path, calibration_dir, sim_buses, ros_env,
                                                        ros_domain_id):
    height, width = SIZE
    cameras = twin_cameras((width, height), 30)
    rig = rig_file(tmp_path, "twin", cameras=cameras, leader={"port": sim_buses.leader, "id": "so101_leader",
                                                              "calibration_dir": str(calibration_dir)})
    root = tmp_path / "ds"
    proc = sgvla_launch(["sim=true", "teleop=leader", f"config={rig}", f"record={root}", "episodes=1",
                         "episode_time_s=3", "reset_time_s=0", "auto_start=true", "task_id=1", "seed=3"],
                        ros_env, ros_domain_id, timeout_s=300)
    assert proc.returncode == 0 and "saved 1 episode(s)" in proc.log, proc.summary

    ds = LeRobotDataset("local/so101_bowls", root=root)
    n = ds.meta.total_frames
    assert ds.meta.total_episodes == 1 and 75 <= n <= 100, n  # 3 s at 30 Hz
    frame = ds[n // 2]
    assert frame["task"] == "pick up the black bowl left of the stove and place it on the stove"  # task 1's prompt
    assert tuple(frame["observation.images.agentview"].shape) == (3, height, width)
    assert tuple(frame["observation.images.wrist"].shape) == (3, height, width)
    assert tuple(frame["observation.images.agentview_depth"].shape)[-2:] == (height, width)
    assert frame["observation.images.agentview"].std() > 0.02  # a rendered scene, not a blank image
    state = np.stack([ds[i]["observation.state"].numpy() for i in range(n)])
    action = np.stack([ds[i]["action"].numpy() for i in range(n)])
    lag = 5
    # Following error once the twin has come from its rest pose to the leader's (up to 100 degrees at a bounded
    # step per tick, a second or more on a loaded machine): the episode's second half.
    err = np.abs(state[lag:, :5] - action[:-lag, :5])[n // 2:]
    moves = {"state ptp": np.ptp(state, axis=0).round(1), "action ptp": np.ptp(action, axis=0).round(1),
             "error max": err.max(axis=0).round(1), "error median": np.median(err, axis=0).round(1)}
    print(moves)
    # The leader's hand moves every joint; the twin's joints move as much and then follow a few ticks behind.
    assert (np.ptp(action[:, :5], axis=0) > 2.0).all(), (moves, proc.log[-3000:])
    assert (np.ptp(state[:, :5], axis=0) > 2.0).all(), (moves, proc.log[-3000:])
    assert np.median(err, axis=0).max() < 5.0, (moves, proc.log[-3000:])
