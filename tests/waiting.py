"""Waiting in tests, one way: poll a condition, or read a child's output, until something shows or a deadline passes.

A test that times out should say what it waited for and what the processes involved said meanwhile (a loaded CI
machine fails in ways a developer's does not), and should stop waiting as soon as a process it depends on has
ended, instead of sleeping out its timeout."""

import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path


def wait_until(condition: Callable, timeout_s: float, what: str | Callable[[], str], *, logs: Iterable[Path] = (),
               procs: Iterable[subprocess.Popen] = (), period_s: float = 0.02):
    """`condition()`'s first true value, polled every `period_s`. AssertionError after `timeout_s`, or at once when one
    of `procs` has ended, naming `what` (or its result, for a callable: details computed only on failure) and quoting
    the tail of each of `logs` that exists."""
    logs, procs = list(logs), list(procs)
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        ended = [(p.args, p.returncode) for p in procs if p.poll() is not None]
        if ended or time.monotonic() >= deadline:
            reason = f"ended: {ended}" if ended else f"timed out after {timeout_s} s"
            raise AssertionError("\n".join([f"waiting for {what() if callable(what) else what}: {reason}"] + [
                f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in logs if log.exists()]))
        time.sleep(period_s)
    return value


def read_until(proc: subprocess.Popen, text: str, timeout_s: float) -> list[str]:
    """The lines of `proc`'s (text-mode) stdout up to the first that holds `text`; fewer at the end of its output or
    once `timeout_s` has passed (checked between lines). The caller asserts on them, quoting them."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not (lines and text in lines[-1]):
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
    return lines
