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
"""

import signal
import subprocess
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
