"""Infrastructure failures of `sgvla eval` on the SO101 twin, for real: a renderer that cannot start, a worker
process killed mid-run, the main process killed. Each failed episode is recorded apart with its reason, never
as a result; worker processes die with the main process however it dies; and a rerun finishes the plan with
every episode recorded exactly once."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

import sgvla.plugins  # noqa: F401  (the plans name registered choices)
from sgvla.cli import main as main_cli
from sgvla.core.config import load_config, parse_override
from sgvla.eval.config import EvalConfig
from sgvla.core.episode import EpisodeKey
from sgvla.eval.runner import plan

from ..waiting import wait_until

pytestmark = [pytest.mark.sim, pytest.mark.integration]  # starts processes (tests/tiers.py)
ENV = {**os.environ, "MUJOCO_GL": "egl", "HF_HUB_OFFLINE": "1"}
PLAN = ["tasks=[0]", "episodes=2", "max_steps=10", "workers=2"]


def command(out, *overrides):
    return [sys.executable, "-m", "sgvla.cli", "eval", "--config", "config/eval/so101_twin.yaml", "--quiet",
            "--out", str(out), *PLAN, *overrides]


def rerun(out, capsys, *overrides) -> str:
    """The same plan again, in this process with one worker (`workers` may differ between runs of a plan)."""
    assert main_cli(command(out, "workers=1", *overrides)[3:]) == 0
    return capsys.readouterr().out


def planned(out) -> list[EpisodeKey]:
    overrides = dict(parse_override(o) for o in PLAN)
    return sorted(plan(load_config(EvalConfig, "config/eval/so101_twin.yaml", overrides)))


def recorded(out) -> list[EpisodeKey]:
    return [EpisodeKey.of(json.loads(line)) for line in (out / "episodes.jsonl").read_text().splitlines()]


def workers_of(main: psutil.Process) -> list[psutil.Process]:
    return [c for c in main.children() if "multiprocessing.spawn" in " ".join(c.cmdline())]


def gone(p: psutil.Process) -> bool:
    try:
        return not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_killing_the_main_process_ends_its_workers_and_a_rerun_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    proc = subprocess.Popen(command(out), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    main = psutil.Process(proc.pid)
    try:
        episodes = out / "episodes.jsonl"
        wait_until(lambda: episodes.exists() and episodes.read_text().count("\n") >= 1, 120, "the first record")
        workers = workers_of(main)
        assert len(workers) == 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_until(lambda: all(gone(w) for w in workers), 5, f"workers {[w.pid for w in workers]} to end")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    done = len(recorded(out))
    assert 1 <= done < len(planned(out)), "the run must be killed midway"
    rerun(out, capsys)
    assert sorted(recorded(out)) == planned(out)  # every episode exactly once


def busy_worker(main: psutil.Process) -> psutil.Process | None:
    """A worker that is running an episode now: one whose CPU time grows (an idle worker waits on its pipe)."""
    workers = workers_of(main)
    before = {w.pid: sum(w.cpu_times()[:2]) for w in workers}
    time.sleep(0.3)
    busy = [w for w in workers if w.is_running() and sum(w.cpu_times()[:2]) - before[w.pid] > 0.05]
    return busy[0] if busy else None


def test_a_lost_worker_costs_only_its_episode_and_the_run_goes_on(tmp_path, capsys):
    """A worker process SIGKILLed mid-episode: that episode is a `worker_lost` infrastructure failure, a new process
    replaces the worker, and every other episode of the plan is recorded, exactly once; a rerun runs the lost one."""
    out = tmp_path / "run"
    proc = subprocess.Popen(command(out, "max_steps=80"), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    killed: list[int] = []
    try:
        main = psutil.Process(proc.pid)
        episodes = out / "episodes.jsonl"
        wait_until(lambda: episodes.exists() and episodes.read_text().count("\n") >= 1, 180, "the first record")

        def kill_a_busy_worker() -> bool:
            worker = busy_worker(main)
            if worker is not None:
                worker.send_signal(signal.SIGKILL)
                killed.append(worker.pid)
            return bool(killed)

        wait_until(kill_a_busy_worker, 60, "a worker running an episode")
        said, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, said[-3000:]
    failures = [json.loads(line) for line in (out / "infra_failures.jsonl").read_text().splitlines()]
    assert [f["kind"] for f in failures] == ["worker_lost"], failures
    assert "the worker process running it died (exit code -9)" in failures[0]["reason"]
    lost = EpisodeKey.of(failures[0])
    assert sorted(recorded(out)) == sorted(k for k in planned(out) if k != lost)  # every other one, once each
    assert f"1 of {len(planned(out))} episode(s) need a rerun: 1 failed on infrastructure" in said
    rerun(out, capsys, "max_steps=80")
    assert sorted(recorded(out)) == planned(out)


def test_a_simulator_that_fails_is_an_infra_failure_retried_by_the_next_run(tmp_path, capsys):
    out = tmp_path / "run"
    broken = {**ENV, "MUJOCO_EGL_DEVICE_ID": "99"}  # no such GPU: the twin's renderer fails in every episode
    run = subprocess.run(command(out, "workers=1", "render_images=true"), env=broken, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    n = len(planned(out))
    assert f"{n} of {n} episode(s) need a rerun: {n} failed on infrastructure ({n}x RuntimeError: The " \
           "MUJOCO_EGL_DEVICE_ID environment variable must be an integer" in run.stdout.replace("\n", " ")
    failures = [json.loads(line) for line in (out / "infra_failures.jsonl").read_text().splitlines()]
    assert {f["kind"] for f in failures} == {"error"} and all("backend.reset(" in f["traceback"] for f in failures)
    assert not (out / "episodes.jsonl").exists() and not (out / "table.md").exists()  # no result, no table
    assert main_cli(["report", str(out)]) == 2
    assert f"no episode records to report. Not in the table: {n} episode(s) whose infrastructure failed" in \
        capsys.readouterr().out.replace("\n", " ")
    rerun(out, capsys)  # render_images may differ between runs of a plan: it changes no outcome
    assert sorted(recorded(out)) == planned(out)
