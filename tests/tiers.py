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
    """Add `integration` to the items that their folder or fixtures say start processes or ROS, and give the tests
    of a module that share a module-scoped fixture one xdist group (its module's path).

    Why the groups: under `pytest -n 2 --dist loadgroup` (make test) tests go to whichever worker is free, and a
    module fixture is set up once per worker that runs one of its tests: test_sim_eval's three runs over topics
    (a minute) and test_shards' runs were done twice. A group runs on one worker, so its fixture is set up once.
    Integration tests are not kept apart otherwise: they run beside each other (each leases its own ROS domain,
    has its own temporary folders and reaps its own processes; scripts/stress_tests.sh runs them beside two busy
    processes). Needs `conftest.pytest_collection_modifyitems` to run before xdist's (tryfirst), which turns the
    group into the test's id suffix, and pytest < 9.2 (requirements.txt)."""
    for item in items:
        try:
            parts = Path(item.path).relative_to(TESTS).parts
        except ValueError:
            parts = ()
        if (parts and parts[0] in INTEGRATION_FOLDERS) or INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
        if parts and shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group("/".join(parts)))


def shares_a_module_fixture(item: pytest.Item) -> bool:
    """The test uses a fixture set up once per module (or class, or package): built for its neighbours too."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(d and d[-1].scope in ("module", "class", "package") for d in defs)


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
