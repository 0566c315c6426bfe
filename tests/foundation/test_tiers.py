"""The tiers' check (tests/tiers.py): an unmarked test cannot start a process or a ROS context, and the folders and
fixtures that start them are marked. This test is itself unmarked, so the check under test is the one that guards it."""

import multiprocessing
import os
import subprocess
from pathlib import Path

import pytest

from .. import tiers


def _child() -> None:  # pragma: no cover - never runs: the start is refused
    pass


@pytest.mark.parametrize("start", [
    lambda: subprocess.run(["true"], check=True),
    lambda: subprocess.Popen(["sleep", "1"]),
    lambda: os.system("true"),
    lambda: multiprocessing.get_context("spawn").Process(target=_child).start(),
    lambda: multiprocessing.get_context("forkserver").Process(target=_child).start(),
    lambda: multiprocessing.get_context("fork").Process(target=_child).start(),
], ids=["run", "popen", "system", "spawn", "forkserver", "fork"])
def test_an_unmarked_test_cannot_start_a_process(start):
    with pytest.raises(tiers.StartedProcess, match="not marked `integration`"):
        start()


def test_an_unmarked_test_cannot_start_a_ros_context():
    import rclpy

    with pytest.raises(tiers.StartedProcess, match=r"ROS context \(rclpy.init\)"):
        rclpy.init(domain_id=0)
    assert not rclpy.ok()


@pytest.mark.integration
def test_a_marked_test_may():
    assert subprocess.run(["true"]).returncode == 0


def test_folders_and_fixtures_that_start_processes_are_marked(request):
    items = request.session.items
    by_folder = {}
    for item in items:
        folder = Path(item.path).relative_to(tiers.TESTS).parts[0]
        by_folder.setdefault(folder, []).append(item.get_closest_marker("integration") is not None)
    for folder in tiers.INTEGRATION_FOLDERS & by_folder.keys():
        assert all(by_folder[folder]), f"an unmarked test in tests/{folder}"
    for item in items:
        if tiers.INTEGRATION_FIXTURES & set(item.fixturenames):
            assert item.get_closest_marker("integration"), f"{item.nodeid} uses a ROS or bus fixture, unmarked"
    me = request.node
    assert me.get_closest_marker("integration") is None


@pytest.mark.integration
def test_tests_sharing_a_module_fixture_run_on_one_worker(tmp_path):
    """`make test`'s `-n 2 --dist loadgroup` sets a module fixture up once: the group tiers.mark gives reaches xdist
    (conftest's hook runs first, and pytest 9.2 broke xdist 3.8's groups: both workers set it up, as test_sim_eval's
    minute of runs was, twice)."""
    import sys

    notes = tmp_path / "setups.txt"
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
                          "-q", str(Path(__file__).with_name("grouping_probe.py"))], cwd=tiers.TESTS.parent,
                         env={**os.environ, "SGVLA_GROUPING_PROBE": str(notes)}, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "4 passed" in run.stdout
    assert len(notes.read_text().split()) == 1, f"the module fixture was set up by {notes.read_text().split()}"
