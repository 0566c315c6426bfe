"""The round trip of an evaluation: `sgvla launch so101_eval sim=true record=BAG` (sim_eval's node graph on the SO101
twin, lock-step, header stamps in simulated time) -> `sgvla bag2dataset` with config/contracts/so101_eval_sim.yaml ->
LeRobotDataset, frame by frame against the bag's own messages."""

import subprocess
import sys

import numpy as np
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from sgvla.nodegraph.bag import read_bag
from sgvla.so101.hardware.joints import JOINTS, from_radians

pytestmark = pytest.mark.ros


def eval_launch(bag, tmp_path, ros_domain_id, steps):
    """`sgvla launch so101_eval sim=true record=BAG`'s command: one episode of the expert, `steps` steps at most."""
    return [sys.executable, "-m", "sgvla.cli", "launch", "so101_eval", "sim=true", f"record={bag}",
            f"output_dir={tmp_path / 'run'}", "--domain-id", str(ros_domain_id),
            f"eval_overrides=tasks=[0] episodes=1 modes=[standard] max_steps={steps} 'policies=[{{type: expert}}]' "
            "suite.image_size=48"]


def check_frames_are_the_steps(bag, out, repo_id):
    """Each frame i of the dataset is the i-th logged joint state with the action the policy sent for that step (the
    done step, which has none, keeps the one before) and the step's task. Returns (frames, states, actions) read."""
    actions, states, task = {}, {}, None
    for topic, _, msg in read_bag(bag, ["/action", "/sim/status", "/joint_states"]):
        if topic == "/action":
            actions[msg.step] = from_radians(JOINTS, list(msg.data))
        elif topic == "/sim/status":
            task = msg.task
        else:
            states[len(states)] = from_radians(list(msg.name), list(msg.position))
    ds = LeRobotDataset(repo_id, root=out)
    n = ds.meta.total_frames
    assert ds.meta.total_episodes == 1 and 0 < n <= len(states), (n, len(states), len(actions))
    for i in range(n):
        frame = ds[i]
        assert frame["task"] == task
        np.testing.assert_allclose(frame["observation.state"].numpy(), [states[i][j] for j in JOINTS], atol=1e-3)
        np.testing.assert_allclose(frame["action"].numpy(), [actions[min(i, max(actions))][j] for j in JOINTS],
                                   atol=1e-3)
    assert tuple(ds[0]["observation.images.agentview"].shape) == (3, 48, 48)
    return n, states, actions


def test_a_twin_evaluation_bag_becomes_one_dataset_episode_per_evaluation_episode(tmp_path, ros_env, ros_domain_id):
    """`sgvla launch so101_eval sim=true record=BAG` (lock-step, simulated time) -> so101_eval_sim.yaml: one frame per
    control step, each with that step's observation and the action the policy sent for it."""
    bag, out = tmp_path / "bag", tmp_path / "ds"
    proc = subprocess.run(eval_launch(bag, tmp_path, ros_domain_id, 12), env={**ros_env, "MUJOCO_GL": "egl"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    proc = subprocess.run([sys.executable, "-m", "sgvla.cli", "bag2dataset", str(bag), "--contract", "so101_eval_sim",
                           "--out", str(out), "--repo-id", "test/eval"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    print(proc.stdout[-1500:])
    # Every step's observation is a frame; the last (done) has no action of its own, and keeps the one before.
    n, states, actions = check_frames_are_the_steps(bag, out, "test/eval")
    assert n == len(states) == len(actions) + 1, (n, len(states), len(actions))
