"""`sgvla eval` with VLM graphs from a real HTTP server on 127.0.0.1 and the real LIBERO simulator: a VLM
outage is an infrastructure failure (recorded apart, not in the table, exit 1 with the number of episodes
to rerun), `on_infra_failure=stop` ends the run, and the next run retries those episodes until each has
exactly one result."""

import json

import pytest

from sgvla.cli import main

pytestmark = pytest.mark.sim


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_vlm_outage_is_an_infra_failure_retried_by_the_next_run(tmp_path, stub, monkeypatch, capsys):
    monkeypatch.setattr(stub, "gate_open", False)  # the server answers HTTP 500 until the gate opens
    client = tmp_path / "stub.yaml"
    client.write_text(f"type: openai\nname: stub\nmodel: stub\nbase_url: {stub.url('gate')}\ntimeout_s: 2\n"
                      "max_retries: 0\n")
    out = tmp_path / "run"
    args = ["eval", "--quiet", "--out", str(out), "tasks=[0]", "episodes=2", "modes=[scene_graph]", "max_steps=4",
            "suite.image_size=64", "suite.render_profile=fast", "workers=1", "policies=[{type: prompt_grounded}]",
            "graph_source=vlm", f"graph_source.client={client}", "graph_source.rate_hz=50"]
    infra, episodes = out / "infra_failures.jsonl", out / "episodes.jsonl"

    assert main([*args, "on_infra_failure=stop"]) == 1
    said = capsys.readouterr().out
    assert "stopped: on_infra_failure=stop, after an infrastructure failure: VLM: the first query" in said
    assert "2 of 2 episode(s) need a rerun: 1 failed on infrastructure (1x VLM: the first query of the episode " \
           "failed: HTTP 500" in said and "1 not run" in said
    (failure,) = lines(infra)
    assert (failure["kind"], failure["seed"], failure["attempt"]) == ("graph_source", 0, 1)
    assert not lines(episodes)  # a failure is never a result

    assert main(args) == 1  # retry_later (the default): every episode is tried, each fails on the VLM
    assert "2 of 2 episode(s) need a rerun: 2 failed on infrastructure" in capsys.readouterr().out
    assert [(r["seed"], r["attempt"]) for r in lines(infra)] == [(0, 1), (0, 2), (1, 1)]

    stub.gate_open = True
    assert main(args) == 0
    said = capsys.readouterr().out
    results = lines(episodes)
    assert sorted(r["seed"] for r in results) == [0, 1] and len(lines(infra)) == 3  # the history stays
    for r in results:
        assert r["vlm_queries"] >= 1 and r["vlm_failed_queries"] == 0 and r["vlm_failure"] == ""
        assert "(none)" not in r["prompt"] and r["triplets_in_prompt"] > 0
    assert "| 0 | ambiguous_prompt |" in (out / "table.md").read_text() and "Not in the table" not in said
    assert "all tasks pooled" in said and f"report: {out / 'report.html'}" in said  # the summary, not the table

    assert main(["report", str(out)]) == 0
    assert "Not in the table" not in capsys.readouterr().out
