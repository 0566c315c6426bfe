"""A LeRobot policy drives the SO101 twin robot through ``lerobot-rollout --policy.path=...`` (LeRobot 0.6.1's
lerobot-record takes no policy: its policy deployment moved to lerobot-rollout).

The policy is a tiny random-weight ACT (`sgvla.policies.tiny`, as ``sgvla make-tiny-policy act --dataset``) made for
the features of a small SO101 dataset written here with LeRobot's own LeRobotDataset; the episodic strategy records
what the policy did into a dataset, which must have the SO101's features and the policy's actions."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.integration  # starts processes (tests/tiers.py)

BIN = Path(sys.executable).parent
W, H, FPS = 64, 48, 15
SECONDS = 4  # the first inference takes a second or more (lazy torch set-up), the rest run near FPS
TASK = "pick up the black bowl on top of the drawer and place it on the stove"


def so101_dataset(root: Path) -> Path:
    """Two short episodes with the robot's features, made into dataset features as lerobot-record makes them."""
    from lerobot.datasets import LeRobotDataset
    from lerobot.utils.feature_utils import hw_to_dataset_features
    from lerobot_robot_so101_twin import SO101Twin, SO101TwinConfig

    robot = SO101Twin(SO101TwinConfig(image_width=W, image_height=H, calibration_dir=root.parent / "cal"))
    features = {**hw_to_dataset_features(robot.action_features, "action", use_video=False),
                **hw_to_dataset_features(robot.observation_features, "observation", use_video=False)}
    rng = np.random.default_rng(0)
    dataset = LeRobotDataset.create("local/so101_tiny", FPS, features=features, root=root, use_videos=False,
                                    robot_type=robot.name)
    for _ in range(2):
        for _ in range(4):
            dataset.add_frame({"observation.state": rng.uniform(-20, 20, 6).astype(np.float32),
                               "action": rng.uniform(-20, 20, 6).astype(np.float32),
                               "observation.images.agentview": rng.integers(0, 255, (H, W, 3), dtype=np.uint8),
                               "observation.images.wrist": rng.integers(0, 255, (H, W, 3), dtype=np.uint8),
                               "task": TASK})
        dataset.save_episode()
    dataset.finalize()
    return root


def test_lerobot_rollout_drives_the_twin_with_a_policy(tmp_path):
    from lerobot.datasets import LeRobotDataset

    from sgvla.policies.tiny import build_tiny_act
    from sgvla.so101.hardware.joints import DEFAULT_LIMITS, JOINTS

    policy = build_tiny_act(tmp_path / "policy", dataset=so101_dataset(tmp_path / "train"))
    root = tmp_path / "rollout"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_LEROBOT_HOME": str(tmp_path / "hf_lerobot"), "MUJOCO_GL": "egl"}
    run = subprocess.run(
        [str(BIN / "lerobot-rollout"), "--strategy.type=episodic", f"--policy.path={policy}",
         "--robot.type=so101_twin", f"--robot.image_width={W}", f"--robot.image_height={H}", f"--robot.fps={FPS}",
         f"--fps={FPS}", "--dataset.repo_id=local/rollout_so101_twin", f"--dataset.root={root}",
         "--dataset.num_episodes=1", f"--dataset.episode_time_s={SECONDS}", "--dataset.reset_time_s=0",
         f"--dataset.single_task={TASK}", "--dataset.video=false", "--dataset.push_to_hub=false",
         "--play_sounds=false"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=240)
    assert run.returncode == 0, f"lerobot-rollout failed:\n{run.stdout[-3000:]}\n{run.stderr[-5000:]}"

    dataset = LeRobotDataset("local/rollout_so101_twin", root=root)
    assert dataset.num_episodes == 1 and dataset.meta.robot_type == "so101_twin"
    keys = [f"{j}.pos" for j in JOINTS]
    assert dataset.features["action"]["names"] == keys and dataset.features["observation.state"]["names"] == keys
    frames = dataset.hf_dataset.with_format("numpy")
    actions, states = np.stack(frames["action"]), np.stack(frames["observation.state"])
    assert 2 <= len(actions) <= SECONDS * FPS + 1, len(actions)
    assert np.isfinite(actions).all()
    # The policy's goals moved the twin: its joints differ between the first and the last frame.
    assert np.abs(states[-1] - states[0]).max() > 0.5, states
    low, high = np.array([DEFAULT_LIMITS[j] for j in JOINTS]).T
    assert ((states >= low - 1.0) & (states <= high + 1.0)).all()  # the twin stayed within its joint limits
