"""`sgvla eval` on the SO101 twin: the same loop, policies and records as on LIBERO."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.sim, pytest.mark.integration]  # starts processes (tests/tiers.py)

ENV = {**os.environ, "MUJOCO_GL": "egl"}


def sgvla_eval(*args: str, plan: str = "config/eval/so101_twin.yaml") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sgvla.cli", "eval", "--config", plan, "--quiet", *args],
                          capture_output=True, text=True, env=ENV, timeout=300)


def records_of(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()]


def test_eval_runs_end_to_end_with_success(tmp_path):
    done = sgvla_eval("episodes=1", "tasks=[1]", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    records = records_of(tmp_path)
    assert {(r["policy"], r["mode"]) for r in records} == {
        (p, m) for p in ("prompt_grounded", "expert") for m in ("standard", "scene_graph")}
    for record in records:
        assert record["success"], record
        assert record["task"] == "pick up the black bowl left of the stove and place it on the stove"
        assert record["perturbation_applied"] == "none" and record["graph_triplets"] > 0
    grounded = [r for r in records if r["policy"] == "prompt_grounded"]
    # Two identical bowls: "left of the stove" names the target, and so does the graph.
    assert all(r["decision_target"] == "black_bowl_1" and r["decision_grounding_correct"] for r in grounded)
    assert {r["mode"]: r["decision_grounding_source"] for r in grounded} == {"standard": "prompt",
                                                                             "scene_graph": "scene_graph"}
    assert all(r["decision_place"] == "black_stove" for r in grounded)
    sg = next(r for r in grounded if r["mode"] == "scene_graph")
    assert sg["triplets_in_prompt"] > 0 and "(target_black_bowl, is_left_of, black_stove)" in sg["prompt"]


def test_under_the_ambiguous_prompt_only_the_graph_finds_the_target(tmp_path):
    """Task 1 with "pick up the black bowl and place it on the stove": the standard prompt leaves the policy with
    two identical bowls (`tie_break: first` takes the nearer one, the wrong one here); the graph's triplets single
    out the target."""
    done = sgvla_eval("policies=[{type: prompt_grounded, tie_break: first}]", "tasks=[1]", "episodes=1",
                      "modes=[standard, scene_graph]", "--out", str(tmp_path),
                      plan="config/eval/so101_twin_ambiguous.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    by_mode = {r["mode"]: r for r in records_of(tmp_path)}
    standard, graph = by_mode["standard"], by_mode["scene_graph"]
    for record in (standard, graph):
        assert record["prompt"].startswith("pick up the black bowl and place it on the stove")
        assert record["perturbation_applied"] == "prompt 'pick up the black bowl and place it on the stove'"
    assert (standard["decision_target"], standard["decision_grounding_source"]) == ("black_bowl_2", "fallback")
    assert not standard["success"] and standard["failure_reason"] == "step limit reached"
    assert (graph["decision_target"], graph["decision_grounding_source"]) == ("black_bowl_1", "scene_graph")
    assert graph["success"] and "(target_black_bowl, is_left_of, black_stove)" in graph["prompt"]


@pytest.mark.parametrize("override, message", [
    ("perturbations=table7", "perturbations 'table7' are not supported by the so101_twin suite; it supports "
                             "['none', 'ambiguous_mid_episode', 'ambiguous_prompt', 'distractor_added', 'mid_episode', "
                             "'spatial_referring', 'support_moved', 'swapped_bowls']"),
    ("tasks=[5]", "unknown task id(s) [5]; so101_twin has tasks [0, 1, 2, 3, 4]"),
])
def test_unsupported_plan_is_a_clear_error(tmp_path, override, message):
    done = sgvla_eval(override, "--out", str(tmp_path))
    assert done.returncode == 2 and message in " ".join((done.stdout + done.stderr).split())  # rich wraps lines
