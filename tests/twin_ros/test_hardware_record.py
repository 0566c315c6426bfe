"""`sgvla launch hardware teleop=leader record=DIR` on the hardware path (so101_arm, so101_leader, camera x2,
dataset_recorder): simulated follower and leader buses, synthetic cameras, a LeRobot dataset over topics."""

import numpy as np
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from .conftest import rig_file, sgvla_launch

pytestmark = pytest.mark.ros


def test_hardware_launch_records_teleoperation_over_topics(tmp_path, calibration_dir, sim_buses, ros_env,
                                                           ros_domain_id):
    cameras = [{"name": "agentview", "source": "synthetic", "width": 64, "height": 48, "fps": 30, "depth": True},
               {"name": "wrist", "source": "synthetic", "width": 64, "height": 48, "fps": 30}]
    root = tmp_path / "ds"
    arm = {"id": "so101_follower", "calibration_dir": str(calibration_dir)}
    rig = rig_file(tmp_path, "synthetic", cameras=cameras, follower={**arm, "port": sim_buses.follower},
                   leader={**arm, "id": "so101_leader", "port": sim_buses.leader})
    proc = sgvla_launch([f"config={rig}", "teleop=leader", f"record={root}", "task=follow the leader",
                         "episodes=1", "episode_time_s=2", "reset_time_s=0", "auto_start=true"],
                        ros_env, ros_domain_id, timeout_s=240)
    assert proc.returncode == 0 and "saved 1 episode(s)" in proc.log, proc.summary
    # (Torque off when the launch ends: tests/hardware/test_shutdown.py, on buses whose registers it reads.)

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
