"""Every process a test starts ends with the test session, however the session ends.

A test reaps its children in `finally` blocks and fixture teardowns, which run on failures, timeouts and Ctrl-C,
but not when the pytest process is killed (a CI step's timeout, `kill -9`, a stress run stopped by hand): its
nodes, launches and simulated buses then kept running, and the domain leases the session held were released
under them, so the next run leasing those domains took their messages. Two things close that:

- `install()` makes `subprocess.Popen` (and so `subprocess.run`) ask the kernel to SIGKILL each child started from
  the main thread when the session's process ends (`sgvla.core.processes.die_with_parent`); each child's own
  children are its business (`sgvla launch` stops its nodes, `sgvla sim-bus` its buses). A child started from
  another thread is left as it is: the kernel would kill it when that thread ends, not the session.
- SIGTERM ends the session as Ctrl-C does (KeyboardInterrupt), so the tests' own cleanup runs first.

`launch_in_child` runs a launch plan in a process of its own: the launcher takes SIGINT and SIGTERM while it runs
(its nodes stop cleanly; the caller gets exit code 130), so run in the session's process it swallowed the signal
that should have ended the session: a stress run's SIGTERM failed test_arm_policy_learned, and the next tests ran.
"""

import pickle
import signal
import subprocess
import sys
import threading

from sgvla.core.processes import die_with_parent


class EndsWithTheSession(subprocess.Popen):
    def __init__(self, *args, **kwargs):
        if kwargs.get("preexec_fn") is None and threading.current_thread() is threading.main_thread():
            kwargs["preexec_fn"] = die_with_parent
        super().__init__(*args, **kwargs)


def install() -> None:
    subprocess.Popen = EndsWithTheSession
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def launch_in_child(plan, domain_id: int) -> subprocess.Popen:
    """``sgvla.launch.run.run_processes(plan, domain_id)`` in a child process (stdout and stderr together, text); its
    exit code is the launch's."""
    code = ("import sys, pickle; from sgvla.cli.launch import say; from sgvla.launch.run import run_processes; "
            f"sys.exit(run_processes(pickle.loads({pickle.dumps(plan)!r}), {domain_id}, log=say).code)")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
