"""Child processes that end with the process that started them (Linux's PR_SET_PDEATHSIG).

A child outliving a parent that was killed keeps its memory and CPU and, when it is a ROS 2 participant, keeps
publishing on a domain whose lease went with the parent: the next run leasing that domain takes its messages.
The kernel sends the signal when the parent *thread* that started the child ends, not the parent process, so such
children are started from a thread that lives as long as their parent (the main thread). The flag is kept
through exec and not inherited by the child's own children: each parent asks for its own.
"""

from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Resolved once, here: `die_with_parent` also runs as a `preexec_fn`, between fork and exec in a child of a process
# that may have threads, where loading a library (taking the dynamic loader's lock) could deadlock.
_prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Have the kernel send `sig` to this process when its parent thread ends. False where there is no prctl
    (not Linux): the caller decides whether to say so. The caller also checks that its parent is still the one
    that started it (`os.getppid()`): a parent that died before this call leaves the request without effect."""
    if _prctl is None:
        return False
    if _prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    return True
