"""Forward kinematics of the SO101 from its URDF: where a link (a camera's parent frame) is at given joint angles.

The wrist camera moves with the gripper, so perception needs its pose in ``base_link`` at the current joint states,
exactly as robot_state_publisher would compute it from ``urdf/so101.urdf``: a chain of fixed and revolute joints,
each ``origin`` (xyz, then roll-pitch-yaw about fixed axes, R = Rz(yaw) Ry(pitch) Rx(roll)) followed by the
rotation about its ``axis``. Plain numpy; the URDF is parsed once.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sgvla.paths import URDF_DIR
from sgvla.so101.urdf import URDF_NAME

BASE_LINK = "base_link"


def rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch), np.cos(yaw), np.sin(yaw)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def axis_angle_matrix(axis: np.ndarray, angle: float) -> np.ndarray:
    x, y, z = axis / np.linalg.norm(axis)
    k = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * (k @ k)


def transform(rotation: np.ndarray, translation) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = rotation, translation
    return pose


def quaternion_matrix(xyzw) -> np.ndarray:
    """(3, 3) rotation of a quaternion x, y, z, w (normalized here)."""
    x, y, z, w = np.asarray(xyzw, dtype=np.float64) / np.linalg.norm(xyzw)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def quaternion_xyzw(rotation: np.ndarray) -> tuple[float, float, float, float]:
    """The quaternion x, y, z, w of a (3, 3) rotation (the inverse of :func:`quaternion_matrix`)."""
    from scipy.spatial.transform import Rotation

    return tuple(float(v) for v in Rotation.from_matrix(rotation).as_quat())


@dataclass(frozen=True)
class UrdfJoint:
    name: str
    kind: str  # fixed | revolute | continuous | prismatic
    parent: str
    origin: np.ndarray  # (4, 4) parent-from-joint at zero
    axis: np.ndarray  # (3,)


class Kinematics:
    """Link poses in ``base_link`` from joint positions (radians; metres for a prismatic joint)."""

    def __init__(self, urdf: str | Path = URDF_DIR / URDF_NAME) -> None:
        path = Path(urdf)
        if not path.is_file():
            raise FileNotFoundError(f"URDF not found: {path} (generate it with `python -m sgvla.so101.urdf`)")
        self._joint_of: dict[str, UrdfJoint] = {}  # child link -> the joint that places it
        root = ET.parse(path).getroot()
        self.links = {link.get("name") for link in root.iter("link")}
        for joint in root.iter("joint"):
            if joint.find("parent") is None:  # a <transmission>'s joint reference
                continue
            origin = joint.find("origin")
            xyz = [float(v) for v in (origin.get("xyz", "0 0 0") if origin is not None else "0 0 0").split()]
            rpy = [float(v) for v in (origin.get("rpy", "0 0 0") if origin is not None else "0 0 0").split()]
            axis = joint.find("axis")
            self._joint_of[joint.find("child").get("link")] = UrdfJoint(
                name=joint.get("name"), kind=joint.get("type"), parent=joint.find("parent").get("link"),
                origin=transform(rpy_matrix(*rpy), xyz),
                axis=np.array([float(v) for v in (axis.get("xyz") if axis is not None else "1 0 0").split()]))

    def chain(self, link: str) -> list[UrdfJoint]:
        """The joints from ``base_link`` to ``link``, base first."""
        if link not in self.links:
            raise ValueError(f"unknown link {link!r}; the URDF's links: {sorted(self.links)}")
        joints = []
        while link != BASE_LINK:
            joint = self._joint_of.get(link)
            if joint is None:
                raise ValueError(f"link {link!r} has no parent joint and is not {BASE_LINK}")
            joints.append(joint)
            link = joint.parent
        return joints[::-1]

    def link_pose(self, link: str, positions: Mapping[str, float]) -> np.ndarray:
        """(4, 4) base_link-from-``link`` at ``positions`` (every moving joint on the chain must be given)."""
        pose = np.eye(4)
        for joint in self.chain(link):
            pose = pose @ joint.origin
            if joint.kind == "fixed":
                continue
            if joint.name not in positions:
                raise ValueError(f"joint {joint.name!r} (on the way to {link!r}) has no position; "
                                 f"given: {sorted(positions)}")
            q = float(positions[joint.name])
            if joint.kind == "prismatic":
                pose = pose @ transform(np.eye(3), joint.axis * q)
            else:
                pose = pose @ transform(axis_angle_matrix(joint.axis, q), np.zeros(3))
        return pose
