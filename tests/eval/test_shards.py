"""Shards of a plan (`shard=i/N`, sgvla.eval.shards) and `sgvla merge`: the shards partition the plan into whole
matched blocks, dealt round-robin; real shard runs merged give the unsharded run's records; every way the folders
can fail to be one plan's shards is refused with a message, and nothing is written."""

import json
import shutil

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import sgvla.plugins  # noqa: F401
from sgvla.cli import main
from sgvla.core.config import ConfigError, load_config
from sgvla.core.episode import EpisodeKey
from sgvla.eval.config import EvalConfig
from sgvla.eval.order import counterbalanced
from sgvla.eval.results import InfraFailures
from sgvla.eval.run_dir import stored_settings
from sgvla.eval.runner import plan, run_plan
from sgvla.eval.shards import MergeError, block, merge_shards, parse_shard, shard_keys

from .plans import small_config

# Two policies, two tasks, two seeds, two modes: 4 matched blocks of 4 episodes.
SMALL = dict(policies=[{"type": "prompt_grounded"}, {"type": "expert"}], tasks=[0, 1], episodes=2, max_steps=20)


def said(capsys) -> str:
    return capsys.readouterr().out.replace("\n", " ")


def lines(run, name="episodes.jsonl") -> list[str]:
    return (run / name).read_text().splitlines(True)


def outcome(record: dict) -> dict:
    """Everything a record says about its episode, but how long it took."""
    return {k: v for k, v in record.items() if k != "wall_time_s" and not k.endswith("_ms_per_step")}


# -- the partition, pure ------------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(tasks=st.integers(1, 4), seeds=st.integers(1, 6), modes=st.integers(1, 3), policies=st.integers(1, 3),
       count=st.integers(1, 9), abba=st.none() | st.integers(0, 5))
def test_shards_are_a_partition_into_whole_blocks_dealt_round_robin(tasks, seeds, modes, policies, count, abba):
    mode_names = [f"m{i}" for i in range(modes)]
    keys = [EpisodeKey(f"p{p}", t, "table7", m, s)
            for t in range(tasks) for s in range(seeds) for m in mode_names for p in range(policies)]
    if abba is not None:
        keys = counterbalanced(keys, mode_names, abba)
    shards = [shard_keys(keys, i, count) for i in range(count)]
    assert sorted(k for shard in shards for k in shard) == sorted(keys)  # every episode, once
    blocks = list(dict.fromkeys(block(k) for k in keys))
    for i, shard in enumerate(shards):
        assert shard == [k for k in keys if k in set(shard)]  # plan order kept
        assert {block(k) for k in shard} == set(blocks[i::count])  # block j goes to shard j mod N, whole
    sizes = [len({block(k) for k in shard}) for shard in shards]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("order", ["matched", "counterbalanced"])
def test_a_plans_shard_is_its_part_and_the_default_is_the_whole_plan(tmp_path, order):
    three = {**SMALL, "episodes": 3, "modes": ["standard", "scene_graph", "scene_graph_full"], "order": order}
    cfg = small_config(tmp_path, **three)
    whole = plan(cfg, all_shards=True)
    assert plan(cfg) == whole and len(whole) == 2 * 2 * 3 * 3
    for count in (1, 2, 4, 7):
        parts = [plan(small_config(tmp_path, **three, shard=f"{i}/{count}")) for i in range(count)]
        assert parts == [shard_keys(whole, i, count) for i in range(count)]
        assert sorted(k for part in parts for k in part) == sorted(whole)
        # a matched block (every mode and policy of one task and seed) is never split
        assert all(len({i for i, part in enumerate(parts) if block(k) in {block(x) for x in part}}) == 1
                   for k in whole)


@pytest.mark.parametrize("value", ["4/4", "-1/4", "1/0", "0/0", "a/b", "1", "1/4/2", "", " 1/4", "1.5/4"])
def test_a_bad_shard_fails_when_the_plan_loads(tmp_path, value):
    with pytest.raises(ConfigError, match=r"shard .* is not a part of the plan: write shard=i/N .* e\.g\. shard=1/4"):
        load_config(EvalConfig, "config/eval/default.yaml", {"shard": value, "output_dir": str(tmp_path)})
    with pytest.raises(ValueError, match="0/1 is the whole plan"):
        parse_shard(value)
    assert parse_shard("3/4") == (3, 4) and parse_shard("0/1") == (0, 1)


def test_a_bad_shard_on_the_command_line_is_a_message(tmp_path, capsys):
    assert main(["eval", "--out", str(tmp_path), "shard=2/2"]) == 2
    assert "shard '2/2' is not a part of the plan: write shard=i/N" in said(capsys)
    assert not any(tmp_path.iterdir())


# -- real runs ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The plan SMALL unsharded ("whole"), and as shards 0/2 (run_plan) and 1/2 (`sgvla eval ... shard=1/2`)."""
    root = tmp_path_factory.mktemp("shards")
    plan_file = root / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(stored_settings(small_config(root / "whole", **SMALL))))
    for name, shard in (("whole", "0/1"), ("shard0", "0/2")):
        summary = run_plan(load_config(EvalConfig, plan_file, {"shard": shard, "output_dir": str(root / name)}),
                           progress=False)
        assert summary.complete
    assert main(["eval", "--config", str(plan_file), "--out", str(root / "shard1"), "--quiet", "shard=1/2"]) == 0
    return root


def copies(runs, tmp_path, *names):
    return [shutil.copytree(runs / name, tmp_path / name) for name in names]


@pytest.mark.sim
def test_merged_shards_are_the_unsharded_run(runs, tmp_path, capsys):
    whole = [json.loads(line) for line in lines(runs / "whole")]
    parts = [[json.loads(line) for line in lines(runs / name)] for name in ("shard0", "shard1")]
    assert len(whole) == 16 and [len(p) for p in parts] == [8, 8]
    assert {(r["task_id"], r["seed"]) for r in parts[0]} == {(0, 0), (1, 0)}  # blocks 0 and 2 of 4

    out = tmp_path / "merged"
    capsys.readouterr()
    assert main(["merge", str(out), str(runs / "shard1"), str(runs / "shard0")]) == 0  # in any order
    printed = capsys.readouterr().out
    merged = [json.loads(line) for line in lines(out)]
    assert [outcome(r) for r in merged] == [outcome(r) for r in whole]  # the same episodes, in plan order
    assert lines(out, "infra_failures.jsonl") == []
    stored = yaml.safe_load((out / "config.yaml").read_text())
    assert stored["shard"] == "0/1" and stored["output_dir"] == str(out)
    assert stored_settings(load_config(EvalConfig, out / "config.yaml")) == stored  # a plan `sgvla eval` takes
    table = (out / "table.md").read_text()
    assert "| 0 | table7 |" in table and "| 1 | table7 |" in table and f"report: {out / 'report.html'}" in printed
    assert (out / "table.csv").is_file() and (out / "success.png").is_file()
    # a merged run reports like any other
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    assert (tmp_path / "report" / "table.md").read_text() == table


@pytest.mark.sim
def test_resuming_a_shards_folder_as_another_shard_is_refused(runs, tmp_path, capsys):
    (shard0,) = copies(runs, tmp_path, "shard0")
    before = (shard0 / "episodes.jsonl").read_bytes()
    capsys.readouterr()
    args = ["eval", "--config", str(shard0 / "config.yaml"), "--out", str(shard0), "--quiet"]
    assert main([*args, "shard=1/2"]) == 2
    message = said(capsys)
    assert "holds a run of another plan" in message and "shard: 0/2 -> 1/2" in message
    assert (shard0 / "episodes.jsonl").read_bytes() == before
    assert main(args) == 0 and (shard0 / "episodes.jsonl").read_bytes() == before  # its own shard: done


@pytest.mark.sim
def test_merge_refuses_folders_that_are_not_one_plans_shards(runs, tmp_path, capsys):
    shard0, shard1 = copies(runs, tmp_path, "shard0", "shard1")

    def refused(*folders, match: str):
        with pytest.raises(MergeError, match=f"(?s){match}"):
            merge_shards(folders)

    # another plan: every differing setting, old -> new, but not shard or harmless settings
    plan1 = yaml.safe_load((shard1 / "config.yaml").read_text())
    (shard1 / "config.yaml").write_text(yaml.safe_dump({**plan1, "max_steps": 21, "alpha": 0.1, "workers": 3}))
    with pytest.raises(MergeError) as error:
        merge_shards([shard0, shard1])
    message = str(error.value)
    assert "the folders hold runs of different plans" in message and "workers" not in message
    assert f"{shard0} -> {shard1}: max_steps: 20 -> 21" in message and "alpha: 0.05 -> 0.1" in message
    (shard1 / "config.yaml").write_text(yaml.safe_dump({**plan1, "shard": "1/3"}))
    refused(shard0, shard1, match=r"shard: 0/2 -> 1/3 \(a different number of shards\)")
    (shard1 / "config.yaml").write_text(yaml.safe_dump(plan1))

    # a shard twice; a shard not given
    twin = shutil.copytree(shard0, tmp_path / "twin")
    refused(shard0, shard1, twin, match=rf"a shard is given more than once.*shard 0/2: {shard0}, {twin}")
    refused(shard0, match=r"the plan has 2 shards; not given: 1/2\. Give every shard's folder.*--allow-missing")

    # an episode twice: in two folders, or in one
    first1 = lines(shard1)[0]
    (shard0 / "episodes.jsonl").write_text("".join(lines(shard0)) + first1)
    refused(shard0, shard1, match=rf"1 episode\(s\) are recorded in more than one folder.*: in {shard0} and {shard1}")
    (shard1 / "episodes.jsonl").write_text("".join(lines(shard1)) + first1)
    refused(shard1, shard0, match=r"episode .* is recorded twice")
    shutil.copy(runs / "shard0" / "episodes.jsonl", shard0)
    shutil.copy(runs / "shard1" / "episodes.jsonl", shard1)

    # a record of no episode of the plan (or of the folder's shard)
    stray = {**json.loads(first1), "seed": 7}
    (shard1 / "episodes.jsonl").write_text("".join(lines(shard1)) + json.dumps(stray) + "\n")
    refused(shard0, shard1, match=r"1 record\(s\) belong to no episode.*'standard', 7\) in .*: no episode of the plan")
    (shard1 / "episodes.jsonl").write_text("".join(lines(shard1)[1:-1]))  # first1 only in shard0's folder now
    (shard0 / "episodes.jsonl").write_text("".join(lines(shard0)) + first1)
    refused(shard0, shard1, match=r"an episode of shard 1/2, not of the folder's shard 0/2")
    shutil.copy(runs / "shard0" / "episodes.jsonl", shard0)
    shutil.copy(runs / "shard1" / "episodes.jsonl", shard1)

    # into a folder that is not empty: refused, and it is left as it was
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(["merge", str(busy), str(shard0), str(shard1)]) == 2
    assert f"{busy} is not empty; merge into a new or empty folder" in said(capsys)
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    assert main(["merge", str(tmp_path / "absent"), str(shard0), str(tmp_path / "nowhere")]) == 2
    assert f"{tmp_path / 'nowhere'} does not exist" in said(capsys) and not (tmp_path / "absent").exists()


@pytest.mark.sim
def test_missing_episodes_are_refused_unless_allowed(runs, tmp_path, capsys):
    shard0, shard1 = copies(runs, tmp_path, "shard0", "shard1")
    *kept, last = lines(shard1)
    (shard1 / "episodes.jsonl").write_text("".join(kept))
    lost = EpisodeKey.of(json.loads(last))
    InfraFailures(shard1 / "infra_failures.jsonl").add(lost, "graph_source", "the VLM did not answer")
    resolved = EpisodeKey.of(json.loads(kept[0]))
    InfraFailures(shard1 / "infra_failures.jsonl").add(resolved, "graph_source", "retried: it has a result")

    with pytest.raises(MergeError) as error:
        merge_shards([shard0, shard1])
    message = str(error.value)
    assert "1 of the plan's 16 episodes are recorded in no folder" in message
    assert f"{tuple(lost)}: shard 1/2 ({shard1}; failed on infrastructure" in message
    assert "Rerunning a shard's command (sgvla eval with the same plan, its shard=i/N and --out) resumes it" in message

    out = tmp_path / "merged"
    capsys.readouterr()
    assert main(["merge", "--allow-missing", str(out), str(shard0), str(shard1)]) == 0
    printed = said(capsys)
    assert "--allow-missing: 1 episode(s) of the plan are missing" in printed and str(tuple(lost)) in printed
    whole = [json.loads(line) for line in lines(runs / "whole")]
    merged = [json.loads(line) for line in lines(out)]
    assert [outcome(r) for r in merged] == [outcome(r) for r in whole if EpisodeKey.of(r) != lost]
    (failure,) = [json.loads(line) for line in lines(out, "infra_failures.jsonl")]  # only the outstanding one
    assert EpisodeKey.of(failure) == lost and failure["reason"] == "the VLM did not answer"
    assert "Not in the table: 1 episode(s) whose infrastructure failed" in (out / "table.md").read_text()
    partial = "Partial run: 1 of the plan's 16 episodes have no result and are not in this report"
    assert (out / "table.md").read_text().startswith(f"**{partial}") and partial in printed  # at the top
    assert partial.replace("'", "&#x27;") in (out / "report.html").read_text()

    # a whole shard missing: merged from the others with --allow-missing, each of its episodes listed
    only = merge_shards([shard0], allow_missing=True)
    assert len(only.records) == 8 and len(only.missing) == 8
    assert all("shard 1/2 (folder not given" in line for line in only.missing)
