"""What LeRobot prints while it loads a policy ("Loading weights from local directory", ...) stays off sgvla's stdout
(issue 44.3), which carries a run's progress and summary: it goes to the log (sgvla.policies.checkpoint's
`lerobot_prints`), where nothing of it is lost."""

import logging

import pytest

from sgvla.cli import main

pytestmark = pytest.mark.sim
LOADING = "Loading weights from local directory"


def test_lerobot_itself_prints_its_loading_line(tiny_act_dir, capfd):
    """The line the run below must keep off stdout is LeRobot's own (a control: LeRobot 0.6.1 prints it)."""
    from lerobot.policies.act.modeling_act import ACTPolicy

    ACTPolicy.from_pretrained(str(tiny_act_dir))
    assert LOADING in capfd.readouterr().out


def test_a_run_with_a_lerobot_policy_prints_its_summary_not_lerobots_lines(tiny_act_dir, tmp_path, capfd, caplog):
    out = tmp_path / "run"
    plan = ["--config", "config/eval/default.yaml", "tasks=[0]", "episodes=1", "modes=[standard]", "max_steps=3",
            f"policies=[{{type: act, path: {tiny_act_dir}}}]", "suite.image_size=64", "workers=1"]
    with caplog.at_level(logging.INFO, logger="sgvla.policies.checkpoint"):
        assert main(["eval", "--out", str(out), "--quiet", *plan]) == 0
    said = capfd.readouterr().out
    assert LOADING not in said, said
    assert said.splitlines()[0] == f"act:{tiny_act_dir.name}: 1 matched block(s), all tasks pooled", said  # first
    assert f"report: {out / 'report.html'}" in said
    logged = [r.getMessage() for r in caplog.records if r.name == "sgvla.policies.checkpoint"]
    assert f"{tiny_act_dir.name}: {LOADING}" in logged, logged  # in the log, not lost
