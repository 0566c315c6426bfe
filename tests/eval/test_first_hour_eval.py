"""`sgvla eval` as a new user meets it: a resumed run with nothing left says so in one line (no bare full progress
bar) and still writes the report; SIGTERM stops a run with worker processes as Ctrl-C does (exit 143), leaving no
"leaked semaphore" warning from multiprocessing's resource tracker. Real runs of the SO101 twin, a few short
episodes."""

import json
import os
import signal
import subprocess
import sys

import pytest

from sgvla.cli import main

from ..waiting import wait_until

pytestmark = pytest.mark.sim
ENV = {**os.environ, "MUJOCO_GL": "egl", "HF_HUB_OFFLINE": "1"}
PLAN = ["--config", "config/eval/so101_twin.yaml", "tasks=[0]", "max_steps=3", "policies=[{type: expert}]"]


def test_a_resume_with_nothing_left_says_so_and_writes_the_report(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["eval", "--out", str(out), "--quiet", *PLAN, "episodes=1"]) == 0
    (out / "table.md").unlink()
    capsys.readouterr()
    assert main(["eval", "--out", str(out), *PLAN, "episodes=1"]) == 0  # with the progress bar on
    said, err = capsys.readouterr()
    assert f"all 2 episodes already recorded in {out}; nothing to run" in said.replace("\n", ""), said
    assert "ep/s" not in err and "100%" not in err, err  # no bar
    assert (out / "table.md").is_file()


def test_the_closing_list_names_every_output_videos_included(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # a path per line, unwrapped
    out = tmp_path / "run"
    assert main(["eval", "--out", str(out), "--quiet", *PLAN, "episodes=1", "modes=[standard]", "video=true",
                 "suite.image_size=64"]) == 0
    said = capsys.readouterr().out
    listed = dict(line.split(": ", 1) for line in said.splitlines()[said.splitlines().index(f"records: {out / 'episodes.jsonl'}"):]
                  if ": " in line)
    assert listed["videos"] == str(out / "videos") and any((out / "videos").iterdir()), said
    written = {p.name for p in out.iterdir()} - {".lock"}  # the run folder's lock is no output
    named = {os.path.basename(v) for v in listed.values()}
    assert written <= named, (written - named, said)


def test_ctrl_c_while_the_report_is_drawn_is_one_line(tmp_path, capsys, monkeypatch):
    import sgvla.eval.report as report

    out = tmp_path / "run"
    assert main(["eval", "--out", str(out), "--quiet", *PLAN, "episodes=1"]) == 0
    draw = report.bar_figure

    def drawing(*args, **kwargs):  # a real Ctrl-C (SIGINT to this process) as the plot begins
        os.kill(os.getpid(), signal.SIGINT)
        return draw(*args, **kwargs)

    monkeypatch.setattr(report, "bar_figure", drawing)
    capsys.readouterr()
    assert main(["eval", "--out", str(out), "--quiet", *PLAN, "episodes=1"]) == 130
    said, err = capsys.readouterr()
    assert (f"sgvla eval: interrupted while writing the report: saved table.md, table.csv, comparisons.csv, "
            f"failures.csv; the records are complete, `sgvla report {out}` writes the report again"
            in said.replace("\n", "")), said
    assert "Traceback" not in said + err


@pytest.mark.integration
def test_sigterm_stops_a_pooled_run_without_leaking_semaphores(tmp_path):
    out, log = tmp_path / "run", tmp_path / "eval.log"
    with log.open("w") as stream:
        proc = subprocess.Popen([sys.executable, "-m", "sgvla.cli", "eval", "--out", str(out), "--quiet", *PLAN,
                                 "episodes=30", "--workers", "2"], env=ENV, stdout=stream, stderr=subprocess.STDOUT)
    try:
        results = out / "episodes.jsonl"
        wait_until(lambda: results.is_file() and results.read_text().count("\n") >= 1, 300,
                   "the first recorded episode", logs=[log], procs=[proc])
        children = _children_of(proc.pid)  # the workers and multiprocessing's resource tracker
        assert any("resource_tracker" in cmdline for cmdline in children.values()), children
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the resource tracker says what leaked once its last user is gone, after the command: wait for it to end too
    wait_until(lambda: not any(_alive(pid) for pid in children), 60, "the command's children's end", logs=[log])
    text = log.read_text()
    assert code == 143, text[-3000:]
    assert "leaked semaphore" not in text and "resource_tracker" not in text, text[-3000:]
    assert "interrupted; every finished episode is recorded" in text.replace("\n", " ")
    lines = results.read_text().splitlines()
    assert 1 <= len(lines) < 60 and all(json.loads(line) for line in lines)  # whole records only


def _children_of(pid: int) -> dict[int, str]:
    """{pid: command line} of the live processes whose parent is `pid`."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found[int(entry)] = cmdline
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
