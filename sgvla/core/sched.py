"""Keep library code from putting sgvla's threads on a real-time scheduling policy.

SVT-AV1, LeRobot's default video encoder (``libsvtav1`` through PyAV), switches the thread that opens an
encoder, and creates its own worker threads, with SCHED_FIFO priority 99 whenever the process may do so
(root, or CAP_SYS_NICE). The calling thread keeps that policy after the encoder is closed, and every thread
and process it starts later inherits it. Measured here: after one episode was saved in the pytest process,
every later child (a simulated servo bus, the nodes of a launch) ran at SCHED_FIFO 99; a rendering thread then
held a core for seconds and the bus, at the same priority, never ran, so the arm's node saw "missing motors".
On a robot computer running as root, the same encoder threads would starve the arm's bus while an episode saves.

:func:`no_realtime` runs a block with CAP_SYS_NICE dropped from the calling thread's effective capabilities
(threads created meanwhile inherit that), so no library can raise a thread's priority in it, and puts the
thread's original policy back afterwards should anything have changed it anyway.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterator
from contextlib import contextmanager

_CAP_VERSION_3 = 0x20080522
CAP_SYS_NICE = 23


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


_LIBC = _libc()


def _set_sys_nice(enabled: bool) -> bool:
    """Set CAP_SYS_NICE in the calling thread's effective set; True if it was effective before."""
    if _LIBC is None or not hasattr(_LIBC, "capget"):
        return False
    header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
    if _LIBC.capget(ctypes.byref(header), data) != 0:
        return False
    bit = 1 << CAP_SYS_NICE
    was = bool(data[0].effective & bit)
    if enabled and not data[0].permitted & bit:
        return was
    data[0].effective = data[0].effective | bit if enabled else data[0].effective & ~bit
    _LIBC.capset(ctypes.byref(header), data)
    return was


def is_realtime() -> bool:
    """Whether the calling thread runs under a real-time policy (SCHED_FIFO or SCHED_RR)."""
    return os.sched_getscheduler(0) in (os.SCHED_FIFO, os.SCHED_RR)


@contextmanager
def no_realtime() -> Iterator[None]:
    """Run the block unable to raise thread priorities; the calling thread's policy is restored after it."""
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    had_nice = _set_sys_nice(False)
    try:
        yield
    finally:
        if os.sched_getscheduler(0) != policy or os.sched_getparam(0) != param:
            os.sched_setscheduler(0, policy, param)  # lowering a priority needs no capability
        if had_nice:
            _set_sys_nice(True)
