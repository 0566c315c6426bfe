"""The C heap of a simulator process: MuJoCo's compiler, the XML parsers and software OpenGL free hundreds of MiB of
temporaries that glibc keeps resident for the process's lifetime otherwise."""

from __future__ import annotations

import ctypes

_malloc_trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc's


def release_free_memory() -> None:
    """Give the memory glibc keeps in its arenas after simulator builds back to the system (80 MiB of the SO101
    twin's 370 after its build; 95 MiB of a LIBERO worker's after its render model's context is made); nothing where
    the C library has no malloc_trim."""
    if _malloc_trim is not None:
        _malloc_trim(0)
