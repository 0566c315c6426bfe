"""A run folder belongs to one plan and one run at a time, and every problem with it is a message (exit 2),
never a traceback: real runs of the SO101 twin (a few short episodes), real locks, a read-only filesystem."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from sgvla.cli import main

pytestmark = pytest.mark.sim
ENV = {**os.environ, "MUJOCO_GL": "egl", "HF_HUB_OFFLINE": "1"}
PLAN = ["--config", "config/eval/so101_twin.yaml", "--quiet", "tasks=[0]", "episodes=1", "max_steps=3",
        "policies=[{type: expert}]"]


def eval_args(out, *extra) -> list[str]:
    """`sgvla eval` of PLAN into `out`, with extra flags and key=value overrides (these win, being last)."""
    flags = [a for a in extra if a.startswith("--") or a.isdigit()]
    return ["eval", "--out", str(out), *flags, *PLAN, *(a for a in extra if a not in flags)]


def evaluate(out, *extra) -> int:
    return main(eval_args(out, *extra))


def said(capsys) -> str:
    return capsys.readouterr().out.replace("\n", " ")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished run of PLAN: two records (standard, scene_graph)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    assert evaluate(out) == 0
    return out


def copy_of(run, tmp_path):
    return shutil.copytree(run, tmp_path / "run")


def test_a_folder_refuses_another_plan_and_new_run_keeps_the_old_one(finished_run, tmp_path, capsys):
    out = copy_of(finished_run, tmp_path)
    before = (out / "episodes.jsonl").read_bytes()
    capsys.readouterr()
    assert evaluate(out, "max_steps=4", "suite.image_size=96", "tasks=[0,1]", "alpha=0.1") == 2
    message = said(capsys)
    assert f"output folder {out} holds a run of another plan" in message
    # alpha too: the sequential test's level is fixed with the plan, never chosen while looking at results
    for diff in ("tasks: [0] -> [0, 1]", "suite.image_size: 128 -> 96", "max_steps: 3 -> 4", "alpha: 0.05 -> 0.1"):
        assert diff in message
    assert "--new-run" in message and (out / "episodes.jsonl").read_bytes() == before

    # Settings that change no outcome may differ; the plan resumes (nothing left to run).
    assert evaluate(out, "name=again", "on_infra_failure=stop", "--workers", "1") == 0
    assert (out / "episodes.jsonl").read_bytes() == before
    # A plan stored before a setting existed counts that setting as its default.
    stored = (out / "config.yaml").read_text()
    (out / "config.yaml").write_text("".join(l for l in stored.splitlines(True) if "context_style" not in l))
    assert evaluate(out) == 0

    capsys.readouterr()
    assert evaluate(out, "max_steps=4", "--new-run") == 0
    assert "started a new run; the previous run's files are in" in said(capsys)
    (old,) = (out / "superseded").iterdir()
    assert (old / "episodes.jsonl").read_bytes() == before and "max_steps: 3" in (old / "config.yaml").read_text()
    assert (old / "report.html").is_file()  # the old run's page goes with its records, never beside the new ones
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 2 and {r["max_steps"] for r in records} == {4}
    assert evaluate(out, "max_steps=4", "--new-run") == 0  # the same plan from scratch: the run moves aside too
    assert len(list((out / "superseded").iterdir())) == 2
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 2

    (out / "config.yaml").unlink()  # records whose plan is unknown
    assert evaluate(out, "max_steps=4") == 2
    assert "config.yaml: missing, so the plan of the records in this folder is unknown" in said(capsys)


@pytest.mark.integration
def test_a_second_run_is_refused_with_the_holders_pid(tmp_path, capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "import sgvla.plugins\nfrom sgvla.core.config import load_config\nfrom sgvla.eval.config import EvalConfig\n"
         "from sgvla.eval.run_dir import RunDir\n"
         f"run = RunDir.open(load_config(EvalConfig, 'config/eval/so101_twin.yaml', {{'output_dir': {str(out)!r}}}))\n"
         "print('locked', flush=True)\ntime.sleep(120)\n"], env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        assert evaluate(out) == 2
        assert f"output folder {out} is in use by another run (pid {holder.pid}); wait for it to end" in said(capsys)
    finally:
        holder.send_signal(signal.SIGKILL)  # the OS releases its lock
        holder.wait()
    assert evaluate(out, "--new-run") == 0  # the holder's (empty) plan differs: no record to mix, so no refusal


def read_only(path, command: list[str]) -> subprocess.CompletedProcess:
    """`command` with `path` read-only: a read-only bind mount as root (root ignores permissions), else 0555."""
    if os.geteuid() == 0:
        script = f"mount --bind -o ro {path} {path} && exec \"$@\""
        return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", *command], env=ENV, capture_output=True,
                              text=True, timeout=120)
    mode = path.stat().st_mode
    path.chmod(0o555)
    try:
        return subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=120)
    finally:
        path.chmod(mode)


@pytest.mark.integration
def test_output_folder_problems_are_messages(finished_run, tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    assert evaluate(a_file) == 2
    assert f"output folder {a_file} is a file, not a folder; choose a folder (--out DIR)" in said(capsys)

    out = copy_of(finished_run, tmp_path)
    cli = [sys.executable, "-m", "sgvla.cli"]
    run = read_only(out, [*cli, *eval_args(out)])
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert f"cannot write to output folder {out}: " in run.stdout.replace("\n", " ")

    report = read_only(out, [*cli, "report", str(out)])
    assert report.returncode == 2 and "Traceback" not in report.stderr, report.stderr[-2000:]
    assert "all tasks pooled" in report.stdout  # the summary, then why the files could not be written
    assert f"cannot write the report files into {out}: " in report.stdout.replace("\n", " ")
    elsewhere = read_only(out, [*cli, "report", str(out), "--out", str(tmp_path / "tables")])
    assert elsewhere.returncode == 0 and (tmp_path / "tables" / "table.csv").is_file()
    # the sequential verdict from the plan stored with the records: one pair planned, run, nothing decided
    table = (tmp_path / "tables" / "table.md").read_text()
    assert "| inconclusive |" in table and "alpha=0.05" in table
    assert "seq. inconclusive" in elsewhere.stdout and "sequential McNemar test at alpha=0.05" in elsewhere.stdout
    assert f"report: {tmp_path / 'tables' / 'report.html'}" in elsewhere.stdout


def test_a_corrupt_line_is_refused_with_file_and_line_and_nothing_changes(finished_run, tmp_path, capsys):
    out = copy_of(finished_run, tmp_path)
    first, second = (out / "episodes.jsonl").read_text().splitlines(True)
    (out / "episodes.jsonl").write_text(first + '{"policy": "expert", "task_id": 0, "perturb\n' + second)
    before = (out / "episodes.jsonl").read_bytes()
    capsys.readouterr()
    for command in (eval_args(out), ["report", str(out)]):
        assert main(command) == 2
        message = said(capsys)
        assert f"{out / 'episodes.jsonl'}:2: not a JSON episode record" in message
        assert "Nothing was changed. Repair that line, or delete it" in message
        assert (out / "episodes.jsonl").read_bytes() == before


@pytest.mark.integration
def test_a_run_folder_removed_mid_run_stops_the_run_with_a_message(tmp_path):
    """The folder deleted under a running plan: the run stops at its next record, saying what was lost (the episode
    that had just finished) and what to do; no traceback, no folder made anew."""
    out = tmp_path / "run"
    args = eval_args(out, "episodes=20", "max_steps=20")  # far more episodes than run before the folder goes
    run = subprocess.Popen([sys.executable, "-m", "sgvla.cli", *args], env=ENV, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        results = out / "episodes.jsonl"
        deadline = time.monotonic() + 300
        while not (results.is_file() and results.read_text().count("\n") >= 1):
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()[0]
            time.sleep(0.05)
        shutil.rmtree(out)
        said_, _ = run.communicate(timeout=300)
    finally:
        run.kill()
    assert run.returncode == 1, said_
    assert f"the run folder {out} was removed while the run was writing into it" in said_.replace("\n", ""), said_
    assert "Traceback" not in said_ and not out.exists()
