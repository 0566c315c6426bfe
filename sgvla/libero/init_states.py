"""LIBERO's initial states, read without torch.

LIBERO stores each task's initial states (``<task>.pruned_init``) with ``torch.save``, and reads them back with
``torch.load`` (LIBERO's benchmark and LeRobot's LIBERO env both do). The files hold no tensors: each is torch's zip
format (``archive/data.pkl`` and ``archive/version``, stored uncompressed) around one plain numpy array, float64,
one row per initial state, pickled at protocol 2 with four globals (``numpy.core.multiarray._reconstruct``,
``numpy.ndarray``, ``numpy.dtype``, ``_codecs.encode``) and no persistent ids (torch's storages). So the array is
unpickled here from the zip with those four globals allowed and nothing else (a file that names another global is
refused, as ``torch.load(weights_only=True)`` would refuse it), and a simulator worker need not import torch (about
1 GiB resident) to read 50 rows of numbers. ``tests/sim/test_libero_tasks.py`` compares every task's array with
``torch.load``'s.
"""

from __future__ import annotations

import codecs
import io
import pickle
import zipfile
from pathlib import Path

import numpy as np

# The globals numpy's own array pickles name; numpy 2 moved numpy.core to numpy._core (the old name still loads).
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): codecs.encode,
}


class InitStatesError(ValueError):
    """An initial-states file that is not a numpy array in torch's zip format."""


class _ArrayUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, path: Path):
        super().__init__(io.BytesIO(data))
        self.path = path

    def find_class(self, module: str, name: str):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise InitStatesError(f"{self.path}: the pickle names {module}.{name}, not a numpy array's part") from None

    def persistent_load(self, pid):
        raise InitStatesError(f"{self.path}: holds torch storages, not a numpy array")


def read_init_states(path: str | Path) -> np.ndarray:
    """The (states, 1 + nq + nv) float64 array of one LIBERO initial-states file (see the module docstring)."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
            if len(pickles) != 1:
                raise InitStatesError(f"{path}: not torch's zip format (no single data.pkl: {archive.namelist()})")
            data = archive.read(pickles[0])
    except zipfile.BadZipFile:
        raise InitStatesError(f"{path}: not torch's zip format (not a zip file)") from None
    states = _ArrayUnpickler(data, path).load()
    if not isinstance(states, np.ndarray) or states.ndim != 2:
        raise InitStatesError(f"{path}: holds {type(states).__name__}, not a 2-D array of states")
    return states
