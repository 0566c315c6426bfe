"""Two processes exchange sgvla_interfaces/SceneGraph messages with real rclpy over loopback DDS."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sgvla.paths import REPO_ROOT

pytestmark = pytest.mark.ros

GRAPHS = [
    {"camera": "agentview", "source": "ground_truth", "objects": ["akita_black_bowl_1", "plate_1"],
     "triplets": [["akita_black_bowl_1", "is_left_of", "plate_1"], ["plate_1", "is_right_of", "akita_black_bowl_1"]],
     "model": "", "prompt_version": ""},
    {"camera": "robot0_eye_in_hand", "source": "vlm", "objects": ["akita_black_bowl_1", "cookies_1"],
     "triplets": [["akita_black_bowl_1", "is_on_top_of", "cookies_1"]], "model": "tiny-qwen", "prompt_version": "v1"},
    {"camera": "agentview", "source": "rgbd", "objects": [], "triplets": [], "model": "", "prompt_version": ""},
]


def node_cmd(node: str, **params) -> list[str]:
    cmd = [sys.executable, "-m", f"sgvla_ros.{node}", "--ros-args"]
    for key, value in params.items():
        cmd += ["-p", f"{key}:={value}"]
    return cmd


def run_pair(tmp_path: Path, env: dict[str, str], prefix: list[str] = ()) -> tuple[list[dict], str]:
    """Recorder and publisher as two processes; returns what the recorder wrote."""
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(g) + "\n" for g in GRAPHS))
    script = (f"{' '.join(node_cmd('graph_recorder', output=out, count=len(GRAPHS)))} & rec=$!; "
              f"{' '.join(node_cmd('graph_publisher', input=src, rate_hz=20.0, wait_for_subscribers=1))}; "
              "wait $rec")
    proc = subprocess.run([*prefix, "bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads(line) for line in out.read_text().splitlines()], proc.stdout + proc.stderr


def test_scene_graphs_cross_processes(tmp_path, ros_env):
    received, _ = run_pair(tmp_path, ros_env)
    assert received == GRAPHS


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("tcpdump") is None,
                    reason="the loopback check needs root and tcpdump (CI has both)")
def test_node_pair_sends_nothing_off_loopback(tmp_path, ros_env):
    received, log = run_pair(tmp_path, ros_env, prefix=[str(REPO_ROOT / "scripts" / "check_loopback.sh")])
    assert received == GRAPHS
    assert ", 0 not on 127/8" in log, log
