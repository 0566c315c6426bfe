"""The evaluation end to end on the real LIBERO simulator: records, resume after a kill, report."""

import json
import os
import signal
import subprocess
import sys
import time

import cv2
import pytest

from sgvla.cli import main
from sgvla.eval.config import EvalConfig
from sgvla.eval.results import EpisodeKey, ResultsFile
from sgvla.eval.runner import plan, run_plan
from sgvla.policies.registry import PolicySpec

pytestmark = pytest.mark.sim
ENV = {**os.environ, "MUJOCO_GL": "egl", "HF_HUB_OFFLINE": "1"}


def small_config(out, **kw) -> EvalConfig:
    base = dict(name="t", policies=[PolicySpec(type="prompt_grounded")], tasks=[0], perturbations="table7",
                modes=["standard", "scene_graph"], episodes=1, render_profile="fast", image_size=64, max_steps=15,
                workers=1, output_dir=str(out))
    return EvalConfig(**{**base, **kw})


def test_records_carry_settings_prompt_and_grounding(tmp_path):
    path, failed = run_plan(small_config(tmp_path, video=True), progress=False)
    records = list(ResultsFile(path).records())
    assert failed == 0 and [r["mode"] for r in records] == ["standard", "scene_graph"]
    std, sg = records
    # T0 under Table 7 overrides the prompt; the graph goes after it in the scene_graph mode only.
    assert std["task"] == "pick up the black bowl in front of the ramekin and place it on the plate"
    assert std["prompt"] == std["task"] and std["triplets_in_prompt"] == 0
    assert sg["prompt"].startswith(sg["task"] + "\nCurrent simulator semantic context:\nScene graph:\nView: agentview\n")
    assert sg["triplets_in_prompt"] > 0 and "(target_akita_black_bowl, " in sg["prompt"]
    assert std["decision_grounding_source"] == "prompt" and sg["decision_grounding_source"] == "scene_graph"
    assert sg["decision_grounding_correct"] is True
    for r in records:
        assert r["steps"] == 15 and r["max_steps"] == 15 and r["seed"] == 0 and r["graph_triplets"] > 0
        assert r["perturbation_applied"] == "prompt 'pick up the black bowl in front of the ramekin and place it on the plate'"
        video = cv2.VideoCapture(r["video"])
        assert int(video.get(cv2.CAP_PROP_FRAME_COUNT)) == 15 and video.read()[1].shape[0] == 64


def test_killed_run_resumes_with_every_episode_once(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "sgvla.cli", "eval", "--quiet", "--out", str(out), "tasks=[0]", "episodes=3",
           "max_steps=15", "image_size=64", "render_profile=fast", "workers=1", "perturbations=table7",
           "policies=[{type: prompt_grounded}]"]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    episodes = out / "episodes.jsonl"
    deadline = time.time() + 600
    while time.time() < deadline and not (episodes.exists() and episodes.read_text().count("\n") >= 2):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = episodes.read_text().count("\n")
    assert 2 <= done_before < 6, "the run must be killed midway"
    rerun = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    keys = [EpisodeKey.of(json.loads(line)) for line in episodes.read_text().splitlines()]
    expected = [EpisodeKey(*(e.policy, e.task_id, e.perturbation, e.mode, e.seed)) for e in plan(
        small_config(out, episodes=3))]
    assert sorted(keys) == sorted(expected) and len(set(keys)) == len(keys)
    assert "| 0 | table7 |" in rerun.stdout and (out / "table.csv").is_file() and (out / "success.png").is_file()


@pytest.mark.parametrize("override, message", [
    ("tasks=[12]", "unknown task id"), ("modes=[graphs]", "unknown mode"), ("perturbations=nope", "nope"),
    ("colour=red", "unknown key(s) colour"), ("policies=[{type: gpt}]", "unknown policy type 'gpt'"),
    ("episodes", "not of the form key=value")])
def test_bad_plan_is_a_clear_error(tmp_path, capsys, override, message):
    assert main(["eval", "--out", str(tmp_path), override]) == 2
    assert message in capsys.readouterr().out
    assert not (tmp_path / "episodes.jsonl").exists()


def test_vlm_graph_source_runs_the_live_worker(tmp_path):
    """graph_source=vlm: a tiny random Qwen2.5-VL, grammar-constrained so every answer line is a
    valid triplet, reads the agentview image each step; its graph goes into the prompt."""
    from sgvla.vlm.tiny import build_tiny_qwen2_5_vl

    model = build_tiny_qwen2_5_vl(tmp_path / "tiny_vlm")
    client = tmp_path / "tiny_client.yaml"
    client.write_text(f"type: transformers\nname: tiny-qwen\nmodel: {model}\ndevice: cpu\ndtype: float32\n"
                      "batch_size: 1\nmax_new_tokens: 24\nconstraint: grammar\n")
    cfg = small_config(tmp_path / "run", modes=["scene_graph"], graph_source="vlm", vlm_client=str(client),
                       vlm_rate_hz=50.0, max_steps=6)
    path, failed = run_plan(cfg, progress=False)
    (record,) = ResultsFile(path).records()
    assert failed == 0 and record["graph_source"] == "vlm" and record["vlm_view"] == "agentview"
    assert record["vlm_queries"] >= 1 and record["vlm_failure"] == ""
    assert record["prompt"].startswith(record["task"] + "\nCurrent simulator semantic context:\nScene graph:\n")
    with pytest.raises(ValueError, match="need boxes"):
        small_config(tmp_path, modes=["bounding_boxes"], graph_source="vlm", vlm_client=str(client))
