"""`sgvla compare RUN_A RUN_B` and the action digest it compares: equal runs exit 0; an episode that differs in
success, steps or actions is listed and exits 1; plans that differ in a setting that changes outcomes are named,
harmless ones (workers, executor) not; a run that cannot be read is one line, exit 2. The digest: float noise and
the sign of zero do not split it, a change of an action or of the steps' boundaries does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

import sgvla.plugins  # noqa: F401
from sgvla.cli import main
from sgvla.core.action_digest import RESOLUTION, ActionDigest, digest_of
from sgvla.core.config import from_mapping
from sgvla.core.episode import EpisodeRecord
from sgvla.eval.config import EvalConfig
from sgvla.eval.results import RESULTS
from sgvla.eval.run_dir import PLAN, stored_settings

RNG = np.random.default_rng(0)
STREAMS = {(task, seed, mode): [RNG.uniform(-1, 1, 7) for _ in range(5 + task)]
           for task in (0, 1) for seed in (0, 1) for mode in ("standard", "scene_graph")}


# -- the digest -----------------------------------------------------------------------------------------------------


def test_float_noise_and_the_sign_of_zero_do_not_split_a_digest():
    stream = list(STREAMS[0, 0, "standard"])
    noisy = [a * (1 + 1e-12) + 1e-13 for a in stream]  # reassociation-sized noise
    assert digest_of(noisy) == digest_of(stream)
    zeros = [np.r_[a[:6], 0.0] for a in stream]
    assert digest_of([np.r_[a[:6], -0.0] for a in stream]) == digest_of(zeros)
    degrees = [np.deg2rad(np.rad2deg(a)) for a in stream]  # LeRobot's SO101 units and back
    assert digest_of(degrees) == digest_of(stream)


def test_a_changed_action_or_step_boundary_changes_the_digest():
    stream = list(STREAMS[0, 0, "standard"])
    moved = [a.copy() for a in stream]
    moved[3][2] += 3 * RESOLUTION
    assert digest_of(moved) != digest_of(stream)
    flat = np.concatenate(stream)
    regrouped = [flat[:8], flat[8:]]  # the same values, other steps
    assert digest_of(regrouped) != digest_of(stream)
    assert digest_of(stream[:-1]) != digest_of(stream)
    nan = [a.copy() for a in stream]
    nan[0][0] = np.nan
    assert digest_of(nan) != digest_of(stream) and digest_of(nan) == digest_of([a.copy() for a in nan])
    digest = ActionDigest()
    for a in stream:
        digest.add(a)
    assert digest.count == len(stream) and digest.hexdigest() == digest_of(stream)


# -- runs -----------------------------------------------------------------------------------------------------------


def _records(policy: str, changed: dict | None = None) -> list[dict]:
    """One record per episode of STREAMS, success when the task is 0, `changed` applied to (task, seed, mode)."""
    out = []
    for (task, seed, mode), stream in STREAMS.items():
        record = EpisodeRecord(policy, task, "ambiguous_prompt", mode, seed, success=task == 0, steps=len(stream),
                               max_steps=280, wall_time_s=1.0 + seed, view="agentview",
                               graph_source="ground_truth", extra={"action_digest": digest_of(stream)}).to_json()
        record.update((changed or {}).get((task, seed, mode), {}))
        out.append(record)
    return out


def _write_run(folder: Path, records: list[dict], **settings) -> Path:
    folder.mkdir(parents=True)
    cfg = from_mapping(EvalConfig, {"suite": {"type": "libero_spatial", "render_profile": "fast", "image_size": 64},
                                    "policies": [{"type": "prompt_grounded"}], "tasks": [0, 1],
                                    "perturbations": "ambiguous_prompt", "episodes": 2, "output_dir": str(folder),
                                    **settings})
    (folder / PLAN).write_text(yaml.safe_dump(stored_settings(cfg)))
    (folder / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_equal_runs_agree_and_exit_0(tmp_path, capsys):
    a = _write_run(tmp_path / "a", _records("prompt_grounded"))
    b = _write_run(tmp_path / "b", _records("prompt_grounded")[::-1], workers=2, executor="local",
                   policy_server={"serve": "all"})  # how it ran changes no outcome
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "8 matched episode(s); 0 only in A" in out
    assert "plans: the same in every setting that changes outcomes" in out
    assert "all 8 matched episodes agree in success, steps and actions" in out


def test_a_differing_episode_is_listed_and_exits_1(tmp_path, capsys):
    changed = {(1, 0, "scene_graph"): {"success": True},
               (0, 1, "standard"): {"action_digest": digest_of(STREAMS[1, 1, "standard"][:6])}}
    a = _write_run(tmp_path / "a", _records("prompt_grounded"))
    b = _write_run(tmp_path / "b", _records("prompt_grounded", changed))
    assert main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "2 of 8 matched episode(s) differ" in out
    assert "task 1, seed 0, scene_graph, ambiguous_prompt, prompt_grounded: success False -> True" in out
    digest = digest_of(STREAMS[0, 1, "standard"])[:12]
    assert f"task 0, seed 1, standard, ambiguous_prompt, prompt_grounded: actions {digest} -> " in out
    listed = [line for line in out.splitlines() if line.startswith("  task ")]
    assert len(listed) == 2


def test_plan_differences_that_change_outcomes_are_named(tmp_path, capsys):
    a = _write_run(tmp_path / "a", _records("prompt_grounded"))
    b = _write_run(tmp_path / "b", _records("prompt_grounded"), max_steps=100, workers=3, tasks=[0, 1, 2])
    assert main(["compare", str(a), str(b)]) == 0  # the episodes agree: the plans' difference is said, not failed
    out = capsys.readouterr().out
    assert "plans differ in settings that change outcomes (A -> B):\n  max_steps: null -> 100\n" in out
    assert "workers" not in out and "tasks" not in out


def test_a_records_file_matches_a_run_of_another_policy_name(tmp_path, capsys):
    """lerobot-eval's --env.records file (policy "lerobot", no stored plan) against a sgvla run folder: episodes
    match without the policy's name, and the records' own settings are compared."""
    a = _write_run(tmp_path / "a", _records("prompt_grounded"))
    file = tmp_path / "lerobot.jsonl"
    records = _records("lerobot", {(0, 0, "standard"): {"steps": 4, "max_steps": 50}})
    file.write_text("".join(json.dumps(r) + "\n" for r in records[:-1]))  # one episode fewer
    assert main(["compare", str(a), str(file)]) == 1
    out = capsys.readouterr().out
    assert "7 matched episode(s) (policy prompt_grounded ~ lerobot); 1 only in A" in out
    assert "the records' settings (a run has no stored plan) differ" in out
    assert "max_steps: 280 -> 50 (in 1 matched episode(s))" in out
    assert "task 0, seed 0, standard, ambiguous_prompt, prompt_grounded: steps 5 -> 4" in out


@pytest.mark.parametrize("problem", ["missing", "no_records", "corrupt", "disjoint"])
def test_runs_that_cannot_be_compared_are_one_line(tmp_path, capsys, problem):
    a = _write_run(tmp_path / "a", _records("prompt_grounded"))
    b = tmp_path / "b"
    if problem == "no_records":
        b.mkdir()
    elif problem == "corrupt":
        b.mkdir()
        (b / RESULTS).write_text('{"policy": "x"}\n{"task_id": 1}\n')
    elif problem == "disjoint":
        _write_run(b, [dict(r, seed=r["seed"] + 10) for r in _records("prompt_grounded")])
    assert main(["compare", str(a), str(b)]) == 2
    out = capsys.readouterr().out
    message = [line for line in out.splitlines() if line.startswith("sgvla compare: ")]
    assert len(message) == 1 and "Traceback" not in out
    expected = {"missing": "no such run folder or records file", "no_records": "not a run folder",
                "corrupt": "a record without", "disjoint": "nothing to compare"}[problem]
    assert expected in message[0]
