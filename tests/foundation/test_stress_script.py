"""scripts/stress_tests.sh --dir: runs of one commit add up over invocations (a 20-run check takes hours), a run cut
short is run again, and a folder of another commit is refused.

The script runs in a throwaway git repository holding a copy of it, a link to this checkout's .venv and two
one-line test files, so the check does not depend on this checkout being committed."""

import subprocess
from pathlib import Path

import pytest

from sgvla.paths import REPO_ROOT

pytestmark = pytest.mark.integration  # starts processes (tests/tiers.py)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "scripts" / "stress_tests.sh").write_bytes((REPO_ROOT / "scripts" / "stress_tests.sh").read_bytes())
    (repo / "scripts" / "stress_tests.sh").chmod(0o755)
    (repo / ".venv").symlink_to(REPO_ROOT / ".venv")
    (repo / "tests" / "test_ok.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    (repo / "tests" / "test_bad.py").write_text("def test_bad():\n    assert 1 + 1 == 3\n")
    (repo / ".gitignore").write_text(".venv\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "tests")
    return repo


def stress(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(repo / "scripts" / "stress_tests.sh"), *args], capture_output=True, text=True,
                          timeout=300)


def test_runs_add_up_in_one_folder_and_another_commit_is_refused(tmp_path):
    repo = make_repo(tmp_path)
    runs = tmp_path / "runs"

    first = stress(repo, "--dir", str(runs), "1", "tests/test_ok.py")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "(0 done before)" in first.stdout and "total: 0 of 1 run(s) failed" in first.stdout
    assert (runs / "identity").read_text().split(";")[0] == f"commit {git(repo, 'rev-parse', 'HEAD')}"

    # A run cut short (its log, no exit status) is run again; the finished one is not.
    (runs / "run2.log").write_text("....")
    (runs / "run2.xml").write_text("<cut")
    before = (runs / "run1.log").stat().st_mtime_ns
    second = stress(repo, "--dir", str(runs), "3", "tests/test_ok.py")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "(1 done before)" in second.stdout and "total: 0 of 3 run(s) failed" in second.stdout
    assert [line.split(":")[0] for line in second.stdout.splitlines() if line.startswith("run ")] == ["run 2/3",
                                                                                                  "run 3/3"]
    assert (runs / "run1.log").stat().st_mtime_ns == before and "1 passed" in (runs / "run2.log").read_text()

    # Other test paths, uncommitted changes and another commit are all refused, naming why; the runs stay.
    other_paths = stress(repo, "--dir", str(runs), "4", "tests/test_bad.py")
    assert other_paths.returncode == 2 and "paths tests/test_ok.py" in other_paths.stderr, other_paths.stderr
    (repo / "tests" / "test_ok.py").write_text("def test_ok():\n    pass\n")
    dirty = stress(repo, "--dir", str(runs), "4", "tests/test_ok.py")
    assert dirty.returncode == 2 and "uncommitted changes" in dirty.stderr, dirty.stderr
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "change")
    moved = stress(repo, "--dir", str(runs), "4", "tests/test_ok.py")
    assert moved.returncode == 2 and f"not of commit {git(repo, 'rev-parse', 'HEAD')}" in moved.stderr, moved.stderr
    assert sorted(p.name for p in runs.glob("run*.rc")) == ["run1.rc", "run2.rc", "run3.rc"]


def test_a_failing_run_is_counted_and_the_exit_status_says_so(tmp_path):
    repo = make_repo(tmp_path)
    done = stress(repo, "--dir", str(tmp_path / "runs"), "1", "tests/test_ok.py", "tests/test_bad.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "failed 1/1: tests/test_bad.py::test_bad" in done.stdout and "total: 1 of 1 run(s) failed" in done.stdout


def test_a_folder_of_other_files_is_refused(tmp_path):
    repo = make_repo(tmp_path)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    refused = stress(repo, "--dir", str(tmp_path / "busy"), "1", "tests/test_ok.py")
    assert refused.returncode == 2 and "holds no stress runs" in refused.stderr, refused.stderr
    assert [p.name for p in (tmp_path / "busy").iterdir()] == ["notes.txt"]
