"""tests/children.py: the processes a test starts end with the test session, killed or stopped.

A stand-in session (a Python process that installs the same thing and starts a sleeping child) is killed with
SIGKILL, where no cleanup of its own runs, and stopped with SIGTERM, where its cleanup runs first."""

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sgvla.paths import REPO_ROOT

from ..waiting import wait_until

pytestmark = pytest.mark.integration  # starts processes (tests/tiers.py)

SESSION = """
import subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from children import install  # tests/children.py
install()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], stdout=subprocess.DEVNULL)
try:  # the pid, which the test waits for before it signals, only once the cleanup below is armed
    print(child.pid, flush=True)
    time.sleep(300)
finally:
    child.terminate()
    child.wait()
    print("reaped", flush=True)
"""


def running(pid: int) -> bool:
    """Neither gone nor a zombie (an orphan's zombie waits for whichever process adopted it)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def start_session() -> tuple[subprocess.Popen, int]:
    session = subprocess.Popen([sys.executable, "-c", SESSION, str(REPO_ROOT / "tests")], stdout=subprocess.PIPE, text=True)
    child = int(session.stdout.readline())
    assert running(child)
    return session, child


def test_a_killed_sessions_children_end_with_it():
    session, child = start_session()
    session.kill()
    session.wait()
    assert session.stdout.read() == ""  # no cleanup of its own ran
    wait_until(lambda: not running(child), 10, f"the killed session's child {child} to end")


def test_sigterm_stops_a_session_as_ctrl_c_does():
    session, child = start_session()
    session.send_signal(signal.SIGTERM)
    assert session.wait(timeout=30) == -signal.SIGINT  # an uncaught KeyboardInterrupt
    assert session.stdout.read() == "reaped\n"
    assert not running(child)
