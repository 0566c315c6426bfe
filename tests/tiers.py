"""Two tiers of tests: `integration` (starts a subprocess, a ROS context, Ray or a launch) and the rest.

`make test-fast` runs the rest in parallel (pytest-xdist): pure tests share nothing but the CPU. Integration tests
are marked here, by folder and by fixture, or by hand (`@pytest.mark.integration`) where neither tells. The mark
is checked, not trusted: while an unmarked test runs, starting a child process or a ROS context fails that test
with what it started, so a new test that spawns cannot slip into the fast tier unmarked. The check patches the
points every child goes through (`subprocess.Popen._execute_child`, `os.fork`, `os.posix_spawn*`, `os.system`,
multiprocessing's `_posixsubprocess.fork_exec`) and rclpy's `Context.init`.

Probes that libraries run for themselves on first use (ctypes' `find_library` asking `ldconfig`, ...) start a
child too, but in whichever test first imports the library: marking the test that happens to run first would make
the tier depend on test order. They are allowed by name (`PROBES`).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
# Folders whose every test starts nodes, launches or buses.
INTEGRATION_FOLDERS = {"ros", "twin_ros", "bags", "readme"}
# Fixtures that start a child or a ROS context, or hand out what only such a test needs (a leased ROS domain).
INTEGRATION_FIXTURES = {"ros_env", "ros_domain_id", "ros_domain_leases", "sim_eval", "rig"}
# Executables that libraries start as probes of the machine, not as part of what a test does.
PROBES = {"ldconfig", "/sbin/ldconfig", "gcc", "cc", "uname", "ld", "objdump", "nvidia-smi", "lsb_release"}


def mark(items: list[pytest.Item]) -> None:
    """Add `integration` to the items that their folder or fixtures say start processes or ROS, and put every
    integration test in one xdist group: under `pytest -n 2 --dist loadgroup` (make test) they run one after
    another in one worker, as they always have (their timing margins assume one neighbour at most), while the other
    worker runs the pure tests beside them."""
    for item in items:
        try:
            folder = Path(item.path).relative_to(TESTS).parts[0]
        except ValueError:
            folder = ""
        if folder in INTEGRATION_FOLDERS or INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
        if item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.xdist_group("integration"))


class StartedProcess(Exception):
    """What an unmarked test started."""


def _refuse(what: str):
    raise StartedProcess(f"this test {what} but is not marked `integration` (tests/tiers.py): mark it "
                         "@pytest.mark.integration, or start nothing")


def _argv0(args) -> str:
    if isinstance(args, (str, bytes, os.PathLike)):
        return os.fsdecode(args).split()[0] if os.fsdecode(args).strip() else ""
    args = list(args)
    return os.fsdecode(args[0]) if args else ""


def guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every way of starting a child process or a ROS context fail the running test."""
    import _posixsubprocess

    execute_child = subprocess.Popen._execute_child

    def checked_execute_child(self, args, executable, *rest, **kw):
        program = os.path.basename(_argv0(executable or args))
        if program not in PROBES and _argv0(executable or args) not in PROBES:
            _refuse(f"starts a subprocess ({_argv0(args)!r})")
        return execute_child(self, args, executable, *rest, **kw)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", checked_execute_child)
    monkeypatch.setattr(os, "fork", lambda: _refuse("forks (os.fork)"))
    monkeypatch.setattr(os, "system", lambda command: _refuse(f"runs os.system({command!r})"))
    for name in ("posix_spawn", "posix_spawnp"):
        monkeypatch.setattr(os, name, lambda path, *a, **k: _refuse(f"spawns {path!r}"))
    monkeypatch.setattr(_posixsubprocess, "fork_exec", lambda *a, **k: _refuse("starts a process (multiprocessing)"))
    try:
        from rclpy.context import Context
    except ImportError:  # pragma: no cover - rclpy is in requirements.txt
        return
    monkeypatch.setattr(Context, "init", lambda *a, **k: _refuse("starts a ROS context (rclpy.init)"))
