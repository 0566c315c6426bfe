"""A digest of an episode's action stream: two records say whether their episodes acted alike, without the actions.

Every action the engine hands out (`Episode.act`), or a driver steps with a policy run elsewhere (LeRobot's loop,
`lerobot_env_sgvla`), is added in the backend's units; the record holds the SHA-256 of the stream (`action_digest`).

Rounding. Each value is rounded to a grid of `RESOLUTION` (1e-4) and hashed as that many whole steps, a
little-endian int64 (so -0.0 and 0.0 are the same 0, and the bytes do not depend on the platform's float format).
Why 1e-4: an action is a command in the backend's units, LIBERO's OSC deltas in [-1, 1] (1e-4 is 5 micrometres or
5e-5 rad of motion per step) or the SO101 twin's joint goals in radians (1e-4 rad is 0.006 degrees): below what moves
the simulated robot differently, so two streams that differ by more than it are two behaviours. And far above the
noise of computing one behaviour twice: float64 reassociation (1e-16 relative), LeRobot's SO101 units and back
(degrees to radians, 1e-14), which a stream must survive to give one digest in `sgvla eval` and in `lerobot-eval`.
A value within its noise of a grid boundary can still round both ways; for float64 noise that chance is about 1e-12
per value. A learned policy computed in float32 in batches of other sizes (a policy server's) differs by ~1e-6 per
value: its stream is not reproducible to the grid and, closed-loop, not to the step; compare success and steps there.

Each step's values are preceded by their count, so the steps' boundaries are part of the stream ([a, b], [c] is not
[a], [b, c]). Non-finite values hash as fixed codes: a NaN action is recorded as such, never as a number.
"""

from __future__ import annotations

import hashlib

import numpy as np

RESOLUTION = 1e-4
_SCALE = 10_000.0  # 1 / RESOLUTION, exactly representable
_LIMIT = float(2**62)  # |value| / RESOLUTION beyond this (and +-inf) is clipped to it
_NAN = np.iinfo(np.int64).min


def quantize(action) -> np.ndarray:
    """The action's values as int64 counts of `RESOLUTION` (NaN: a fixed code)."""
    values = np.asarray(action, dtype=np.float64).reshape(-1)
    with np.errstate(invalid="ignore"):
        steps = np.rint(np.clip(values * _SCALE, -_LIMIT, _LIMIT))
        out = np.where(np.isnan(steps), 0.0, steps).astype(np.int64)
    out[np.isnan(values)] = _NAN
    return out


class ActionDigest:
    """The running digest of one episode's actions (see the module docstring)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.count = 0

    def add(self, action) -> None:
        steps = quantize(action)
        self._hash.update(np.int64(len(steps)).astype("<i8").tobytes())
        self._hash.update(steps.astype("<i8").tobytes())
        self.count += 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def digest_of(actions) -> str:
    """The digest of a whole stream (a list of actions), as an episode's record gives it."""
    digest = ActionDigest()
    for action in actions:
        digest.add(action)
    return digest.hexdigest()
