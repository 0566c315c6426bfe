"""Keyboard teleoperation: single key presses move a joint goal, in LeRobot units (degrees; gripper %).

The goal follows the arm's present position until the first key (so starting the keyboard moves nothing);
then every press moves one joint by ``step``, clamped to the joint limits. It is a goal like the leader arm's, so whatever receives it
applies the follower's safety layer unchanged (its own limits, at most max_step ahead per tick).
"""

from __future__ import annotations

import os
import select
from collections.abc import Mapping

from sgvla.so101.hardware.joints import DEFAULT_LIMITS, JOINTS
from sgvla.so101.hardware.recording import TerminalKeys

UP, DOWN = "qwerty", "asdfgh"  # one row of the keyboard raises the joints in JOINTS order, the row below lowers
KEYS = {key: (joint, sign) for row, sign in ((UP, +1), (DOWN, -1)) for key, joint in zip(row, JOINTS, strict=True)}
HOME = "x"  # back to where the arm was when the keyboard took over


def help_text(step: float) -> str:
    rows = [f"  {up} / {down}  {joint} +/-" for up, down, joint in zip(UP, DOWN, JOINTS, strict=True)]
    return "\n".join([f"keyboard teleoperation: each press moves a joint {step:g} degrees (gripper: %)", *rows,
                      f"  {HOME}      home: the pose the arm had when the keyboard took over", "  Ctrl-C  quit"])


class KeyboardGoal:
    """A joint goal moved by keys. Until the first key it follows the arm (`seed`); that pose is home."""

    def __init__(self, step: float = 2.0, limits: Mapping[str, tuple[float, float]] = DEFAULT_LIMITS):
        if step <= 0:
            raise ValueError(f"step must be > 0, got {step}")
        self.step, self.limits = step, limits
        self.goal: dict[str, float] | None = None  # None until the arm's position is known
        self.home: dict[str, float] | None = None
        self.active = False  # a key moved the goal: from now on it is the operator's

    def _clamp(self, joint: str, value: float) -> float:
        low, high = self.limits[joint]
        return min(max(value, low), high)

    def seed(self, present: Mapping[str, float]) -> None:
        """The arm's present position (all joints), taken as goal and home until the first key."""
        if not self.active and set(JOINTS) <= set(present):
            self.goal = {j: self._clamp(j, present[j]) for j in JOINTS}
            self.home = dict(self.goal)

    def press(self, key: str) -> str | None:
        """Apply a key; returns what it moved (a joint, or "home"); None for other keys and before any seed."""
        key = key.lower()
        if self.goal is None or (key != HOME and key not in KEYS):
            return None
        self.active = True
        if key == HOME:
            self.goal = dict(self.home)
            return "home"
        joint, sign = KEYS[key]
        self.goal[joint] = self._clamp(joint, self.goal[joint] + sign * self.step)
        return joint


class RawKeys(TerminalKeys):
    """Every character typed (TerminalKeys' cbreak terminal handling, without its recording key map)."""

    def poll(self) -> str | None:
        if select.select([self.stream], [], [], 0)[0]:
            return os.read(self.stream.fileno(), 1).decode(errors="ignore") or None  # "": end of a piped stdin
        return None
