"""`sgvla eval` on the SO101 twin: the same loop, policies and records as on LIBERO."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.sim

ENV = {**os.environ, "MUJOCO_GL": "egl"}


def sgvla_eval(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sgvla.cli", "eval", "--config", "config/eval/so101_twin.yaml",
                           "--quiet", *args], capture_output=True, text=True, env=ENV, timeout=300)


def test_eval_runs_end_to_end_with_success(tmp_path):
    done = sgvla_eval("episodes=1", "tasks=[1]", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert {(r["policy"], r["mode"]) for r in records} == {
        (p, m) for p in ("prompt_grounded", "expert") for m in ("standard", "scene_graph")}
    for record in records:
        assert record["success"], record
        assert record["task"] == "pick up the black bowl left of the stove and place it on the stove"
        assert record["perturbation_applied"] == "none" and record["graph_triplets"] > 0
    grounded = [r for r in records if r["policy"] == "prompt_grounded"]
    assert all(r["decision_target"] == "black_bowl" and r["decision_grounding_correct"] for r in grounded)
    assert all(r["decision_place"] == "black_stove" for r in grounded)
    sg = next(r for r in grounded if r["mode"] == "scene_graph")
    assert sg["triplets_in_prompt"] > 0 and "(target_black_bowl, is_left_of, black_stove)" in sg["prompt"]


@pytest.mark.parametrize("override, message", [
    ("perturbations=table7", "not supported by the so101_twin suite"),
    ("tasks=[5]", "unknown task id(s) [5]; so101_twin has tasks [0, 1, 2, 3, 4]"),
    ("policies=[{type: act, path: x}]", "the so101_twin suite runs scripted policies only; not supported: ['act']"),
])
def test_unsupported_plan_is_a_clear_error(tmp_path, override, message):
    done = sgvla_eval(override, "--out", str(tmp_path))
    assert done.returncode == 2 and message in " ".join((done.stdout + done.stderr).split())  # rich wraps lines
