"""SIGTERM handled as Ctrl-C is: an exception in the main thread, so the same cleanup runs.

Python's default SIGTERM ends the process on the spot: no `finally`, no `atexit`. A command that holds a process pool
then leaves its workers' queues unreleased, and multiprocessing's resource tracker (a process of its own, which
outlives it) prints "There appear to be 5 leaked semaphore objects to clean up at shutdown" after every
`kill`/`timeout`/service stop of `sgvla eval`. Raised as `Terminated` (a `KeyboardInterrupt`), the signal takes the
path Ctrl-C takes: the pool is shut down, the run folder's lock released, the interpreter exits normally, and the
command ends with 143 (128 + SIGTERM) where Ctrl-C ends with 130.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived."""


def exit_code(interrupt: BaseException) -> int:
    """The shell's code for a command stopped by this interrupt: 143 for SIGTERM, 130 for Ctrl-C."""
    return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While entered (in the main thread), SIGTERM raises `Terminated`; the previous handler comes back after. Outside
    the main thread (where Python cannot set handlers) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
