"""`sgvla launch hardware teleop:=leader record:=DIR` on the hardware path (so101_arm, so101_leader, camera x2,
dataset_recorder): simulated follower and leader buses, synthetic cameras, a LeRobot dataset over topics."""

import numpy as np
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from sgvla.hardware.sim_bus import SimFeetechBus

from .conftest import rig_file, sgvla_launch

pytestmark = pytest.mark.ros


def test_hardware_launch_records_teleoperation_over_topics(tmp_path, calibration_dir, leader_bus, ros_env,
                                                           ros_domain_id):
    cameras = [{"name": "agentview", "source": "synthetic", "width": 64, "height": 48, "fps": 30, "depth": True},
               {"name": "wrist", "source": "synthetic", "width": 64, "height": 48, "fps": 30}]
    root = tmp_path / "ds"
    with SimFeetechBus() as follower_bus:
        arm = {"id": "so101_follower", "calibration_dir": str(calibration_dir)}
        rig = rig_file(tmp_path, "synthetic", cameras=cameras,
                       follower={**arm, "port": follower_bus.port},
                       leader={**arm, "id": "so101_leader", "port": leader_bus.port})
        proc = sgvla_launch([f"config:={rig}", "teleop:=leader", f"record:={root}", "task:=follow the leader",
                             "episodes:=1", "episode_time_s:=2", "reset_time_s:=0", "auto_start:=true"],
                            ros_env, ros_domain_id, timeout_s=240)
        torque = [follower_bus.register(i, "Torque_Enable") for i in range(1, 7)]
    assert proc.returncode == 0 and "saved 1 episode(s)" in proc.log, proc.log[-4000:]
    assert torque == [0] * 6  # the arm node released the follower when the launch ended

    ds = LeRobotDataset("local/so101_bowls", root=root)
    assert ds.meta.total_episodes == 1 and 45 <= ds.meta.total_frames <= 66, ds.meta.total_frames  # 2 s at 30 Hz
    frame = ds[ds.meta.total_frames // 2]
    assert tuple(frame["observation.images.agentview"].shape) == (3, 48, 64)
    assert tuple(frame["observation.images.wrist"].shape) == (3, 48, 64)
    assert "observation.images.agentview_depth" in frame and frame["task"] == "follow the leader"
    state = np.stack([ds[i]["observation.state"].numpy() for i in range(ds.meta.total_frames)])
    action = np.stack([ds[i]["action"].numpy() for i in range(ds.meta.total_frames)])
    # The leader swings +-26 degrees at 0.08 Hz: over 2 s the goals move, and the follower follows them.
    assert np.ptp(action[:, :5], axis=0).max() > 3.0
    assert np.abs(state[5:, :5] - action[:-5, :5]).max() < 10.0
