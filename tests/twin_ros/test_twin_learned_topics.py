"""A learned policy on the SO101 twin over topics: `sgvla launch sim_eval` with a twin plan subscribes the policy to
both twin cameras (the suite's, not LIBERO's) and gives the same records and actions as in process, for a tiny
random ACT built from twin demos that reads the agentview and the wrist camera."""

import json
import os
import sys

import numpy as np
import pytest
import yaml

from sgvla.paths import REPO_ROOT

pytestmark = [pytest.mark.ros, pytest.mark.sim, pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_learned_twin_policy_reads_both_cameras_over_topics_as_in_process(tiny_act, sim_eval, tmp_path):
    from lerobot.configs import PreTrainedConfig

    features = PreTrainedConfig.from_pretrained(str(tiny_act)).input_features
    assert {"observation.images.agentview", "observation.images.wrist"} <= set(features)
    plan = {"name": "twin_learned", "suite": {"type": "so101_twin", "image_size": 64},
            "policies": [{"type": "act", "path": str(tiny_act)}], "tasks": [0], "perturbations": "none",
            "modes": ["standard", "scene_graph"], "episodes": 1, "max_steps": 25, "workers": 1,
            "output_dir": str(tmp_path / "inprocess")}
    config = tmp_path / "plan.yaml"
    config.write_text(yaml.safe_dump(plan))
    logs = sim_eval.run_together({
        "topics": [sys.executable, "-m", "sgvla.cli", "launch", "sim_eval", f"eval_config={config}",
                   f"output_dir={tmp_path / 'topics'}", "--record", str(tmp_path / "bag"),
                   "--domain-id", str(sim_eval.domain_ids(1)[0])],
        "inprocess": [sys.executable, str(REPO_ROOT / "tests/ros/inprocess_episodes.py"), str(config),
                      str(tmp_path / "inprocess.npz")],
    }, {**os.environ, "MUJOCO_GL": "egl", "HF_HUB_OFFLINE": "1"}, timeout_s=800)
    inproc = np.load(tmp_path / "inprocess.npz")
    expected = json.loads(str(inproc["records"]))
    got = [json.loads(line) for line in (tmp_path / "topics" / "episodes.jsonl").read_text().splitlines()]
    assert len(got) == 2, logs["topics"][-4000:]
    bag = sim_eval.bag_messages(tmp_path / "bag")
    assert {"/camera/agentview/image_raw", "/camera/wrist/image_raw"} <= set(bag), sorted(bag)
    sim_eval.assert_same_episodes(expected, got, inproc, bag)
    assert all(r["steps"] == 25 and not r["infra_failure"] for r in got), got
