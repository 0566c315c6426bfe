"""Safety rules between a command and the motors. Every command to the follower passes through them.

Units are LeRobot's (degrees; gripper 0..100 %). The order matters: a goal is first clamped into
the joint limits, then moved at most ``max_step`` away from where the joint *is* (LeRobot's
``max_relative_target``, measured against the last read state), so a stale or wild target can only
ever produce a small, bounded motion per control tick.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sgvla.so101.hardware.joints import DEFAULT_LIMITS, JOINTS


class UnsafeCommand(ValueError):
    """A command that cannot be made safe by clamping (unknown joint, NaN): it is refused whole."""


@dataclass
class SafetyConfig:
    joint_limits: dict[str, list[float]] = field(
        default_factory=lambda: {j: list(lim) for j, lim in DEFAULT_LIMITS.items()})
    max_step: float = 8.0  # largest change of goal per command, from the present position
    command_timeout_s: float = 0.5  # watchdog: older commands are stale and the arm holds still

    def __post_init__(self):
        unknown = sorted(set(self.joint_limits) - set(JOINTS))
        if unknown:
            raise ValueError(f"joint_limits: unknown joint(s) {unknown}; valid: {list(JOINTS)}")
        self.joint_limits = {**{j: list(lim) for j, lim in DEFAULT_LIMITS.items()}, **self.joint_limits}
        for joint, (low, high) in self.joint_limits.items():
            if not low < high:
                raise ValueError(f"joint_limits.{joint}: lower {low} must be below upper {high}")
        if self.max_step <= 0 or self.command_timeout_s <= 0:
            raise ValueError("max_step and command_timeout_s must be > 0")


def safe_goal(goal: Mapping[str, float], present: Mapping[str, float], config: SafetyConfig,
              max_step: float | None = None) -> dict[str, float]:
    """The goal made safe: every value finite and known, clamped to limits, at most max_step from present."""
    max_step = config.max_step if max_step is None else max_step
    unknown = sorted(set(goal) - set(JOINTS))
    if unknown:
        raise UnsafeCommand(f"command names unknown joint(s) {unknown}; valid: {list(JOINTS)}")
    bad = sorted(j for j, v in goal.items() if not math.isfinite(v))
    if bad:
        raise UnsafeCommand(f"command has non-finite target(s) for {bad}")
    safe = {}
    for joint, target in goal.items():
        low, high = config.joint_limits[joint]
        target = min(max(target, low), high)
        now = present[joint]
        safe[joint] = min(max(target, now - max_step), now + max_step)
    return safe


class Watchdog:
    """Tells when the command stream went quiet for longer than ``timeout_s``."""

    def __init__(self, timeout_s: float, clock: Callable[[], float] = time.monotonic):
        self.timeout_s = timeout_s
        self.clock = clock
        self.last_feed: float | None = None

    def feed(self) -> None:
        self.last_feed = self.clock()

    @property
    def stale(self) -> bool:
        """True before the first command and whenever the last one is older than the timeout."""
        return self.last_feed is None or self.clock() - self.last_feed > self.timeout_s
