"""`sgvla eval` with one policy server for its workers, on the real LIBERO simulator: every learned policy type runs
a plan with two workers, with per-worker copies and served; served and per-worker runs record the same episodes
(how batches form is tests/policies/test_policy_server.py's: here workers start when they start);
and a policy server killed mid-run costs only its running episodes, as infrastructure failures a rerun finishes."""

import json
import multiprocessing

import pytest

import sgvla.plugins  # noqa: F401
from sgvla.core.episode import EpisodeKey
from sgvla.eval.config import EvalConfig
from sgvla.eval.runner import plan, run_plan
from sgvla.policies.tiny import TINY_BUILDERS

from .plans import records_by_key, run_with, small_config

pytestmark = [pytest.mark.sim, pytest.mark.integration]  # starts processes (tests/tiers.py)


def _plan(out, policies, **settings) -> EvalConfig:
    return small_config(out, **{"policies": policies, "perturbations": "ambiguous_prompt", "max_steps": 12,
                                "workers": 2, **settings})


@pytest.fixture(scope="module")
def tiny_checkpoints(tmp_path_factory) -> dict[str, str]:
    """One tiny random checkpoint of every LeRobot policy type sgvla can build offline."""
    root = tmp_path_factory.mktemp("tiny")
    return {kind: str(build(root / kind)) for kind, build in TINY_BUILDERS.items()}


def test_every_learned_type_runs_two_workers_with_and_without_the_server(tiny_checkpoints, tmp_path):
    policies = [{"type": kind, "path": path} for kind, path in tiny_checkpoints.items()]
    policies.append({"type": "lerobot", "path": tiny_checkpoints["act"], "name": "any_act"})
    runs = {}
    for serve in ("none", "learned"):
        cfg = _plan(tmp_path / serve, policies, modes=["scene_graph"], policy_server={"serve": serve})
        summary = run_plan(cfg, progress=False)
        assert summary.complete and summary.recorded == len(plan(cfg)), summary
        runs[serve] = records_by_key(tmp_path / serve)
        if serve == "learned":  # one server for both workers, hosting every policy, serving every step
            steps = {name: stats["steps"] for name, stats in summary.policy_server.items()}
            assert steps == {p.display_name: 12 for p in cfg.policies}, summary.policy_server
    assert runs["none"].keys() == runs["learned"].keys()
    for key, record in runs["none"].items():
        assert record == runs["learned"][key], key


def test_scripted_policies_served_record_exactly_what_they_record_in_the_workers(tmp_path):
    policies = [{"type": "prompt_grounded"}, {"type": "expert"}]
    runs = {}
    for serve in ("none", "all"):
        cfg = _plan(tmp_path / serve, policies, max_steps=30, policy_server={"serve": serve})
        assert run_plan(cfg, progress=False).complete
        runs[serve] = records_by_key(tmp_path / serve)
    assert runs["none"] == runs["all"]


def _kill_the_server(killed: list) -> bool:
    servers = [p for p in multiprocessing.active_children() if p.name == "sgvla-policy-server"]
    if servers:
        servers[0].kill()
        killed.append(servers[0].pid)
    return bool(servers)


def test_a_killed_policy_server_costs_its_running_episodes_and_a_rerun_finishes(tmp_path):
    cfg = _plan(tmp_path, [{"type": "prompt_grounded"}], episodes=3, max_steps=30,
                policy_server={"serve": "all"})
    killed: list = []
    first = run_with(cfg, lambda: _kill_the_server(killed))
    assert killed, "the policy server was never seen running"
    lost = [r for r in first.outstanding.values() if r["kind"] == "policy_server_lost"]
    assert lost and len(first.outstanding) == len(lost), first.outstanding
    assert first.recorded + len(first.outstanding) == len(plan(cfg))  # the server came back for the rest

    second = run_plan(cfg, progress=False)
    assert second.complete and second.recorded == len(lost)
    keys = [EpisodeKey.of(json.loads(line)) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert sorted(keys) == sorted(plan(cfg))  # each once
