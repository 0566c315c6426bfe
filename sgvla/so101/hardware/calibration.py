"""Calibration files: SO101 arms in LeRobot's JSON format, cameras as ROS camera_info YAML.

Arm files are the ones ``lerobot-calibrate`` writes (one per arm id), read and checked here before
any motor is touched, so that a missing or damaged file is a clear error instead of LeRobot's
interactive prompt. Camera files are what ROS camera_calibration writes, plus an optional
``extrinsics`` block (camera pose in a parent frame) that ROS parsers ignore.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

from sgvla.so101.hardware.joints import JOINTS, MOTOR_IDS
from sgvla.paths import CALIBRATION_DIR

if TYPE_CHECKING:  # LeRobot (and torch) load only where arms are used, not for cameras
    from lerobot.motors import MotorCalibration

RESOLUTION = 4096
# Where lerobot-calibrate puts the files of --robot.type=so101_follower / --teleop.type=so101_leader,
# below LeRobot's calibration folder.
LEROBOT_SUBDIRS = {"follower": "robots/so_follower", "leader": "teleoperators/so_leader"}


class CalibrationError(ValueError):
    pass


def calibrate_hint(role: str, port: str, arm_id: str) -> str:
    kind = "robot" if role == "follower" else "teleop"
    return f"create it with: lerobot-calibrate --{kind}.type=so101_{role} --{kind}.port={port} --{kind}.id={arm_id}"


def arm_calibration_path(role: str, arm_id: str, calibration_dir: str = "") -> Path:
    if not calibration_dir:
        from lerobot.utils.constants import HF_LEROBOT_CALIBRATION

        calibration_dir = HF_LEROBOT_CALIBRATION / LEROBOT_SUBDIRS[role]
    return Path(calibration_dir).expanduser() / f"{arm_id}.json"


def load_arm_calibration(path: str | Path) -> dict[str, MotorCalibration]:
    """The six motors' calibration from a LeRobot JSON file, checked for what would make the arm misbehave."""
    from lerobot.motors import MotorCalibration

    path = Path(path)
    if not path.is_file():
        raise CalibrationError(f"arm calibration file not found: {path}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CalibrationError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict) or set(data) != set(JOINTS):
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise CalibrationError(f"{path}: expected one entry per joint {list(JOINTS)}, found {found}")
    calibration = {}
    for joint in JOINTS:
        entry = data[joint]
        try:
            cal = MotorCalibration(**{k: int(entry[k]) for k in ("id", "drive_mode", "homing_offset",
                                                                  "range_min", "range_max")})
        except (KeyError, TypeError, ValueError) as e:
            raise CalibrationError(f"{path}: {joint}: needs integer id, drive_mode, homing_offset, range_min, "
                                   f"range_max ({e!r})") from None
        problems = [f"id {cal.id} (expected {MOTOR_IDS[joint]})" if cal.id != MOTOR_IDS[joint] else "",
                    f"drive_mode {cal.drive_mode} (0 or 1)" if cal.drive_mode not in (0, 1) else "",
                    f"homing_offset {cal.homing_offset} (|x| <= 2047)" if abs(cal.homing_offset) > 2047 else "",
                    f"range {cal.range_min}..{cal.range_max} (need 0 <= min < max <= 4095)"
                    if not 0 <= cal.range_min < cal.range_max < RESOLUTION else ""]
        if any(problems):
            raise CalibrationError(f"{path}: {joint}: invalid " + "; ".join(p for p in problems if p))
        calibration[joint] = cal
    return calibration


def write_arm_calibration(path: str | Path, calibration: dict[str, MotorCalibration]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({j: asdict(c) for j, c in calibration.items()}, indent=4) + "\n")
    return path


@dataclass(frozen=True)
class CameraCalibration:
    """sensor_msgs/CameraInfo fields, and where the camera sits (``parent_frame`` <- camera)."""

    camera_name: str
    width: int
    height: int
    distortion_model: str
    k: tuple[float, ...]  # 3x3 row-major
    d: tuple[float, ...]
    r: tuple[float, ...]  # 3x3
    p: tuple[float, ...]  # 3x4
    parent_frame: str = ""
    translation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation_xyzw: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)

    def scaled_to(self, width: int, height: int) -> CameraCalibration:
        """Intrinsics for a stream of another resolution with the same field of view."""
        if (width, height) == (self.width, self.height):
            return self
        sx, sy = width / self.width, height / self.height
        scale = np.array([sx, sy, 1.0])[:, None]
        k = (np.array(self.k).reshape(3, 3) * scale).ravel().tolist()
        p = (np.array(self.p).reshape(3, 4) * scale).ravel().tolist()
        return CameraCalibration(self.camera_name, width, height, self.distortion_model, tuple(k), self.d, self.r,
                                 tuple(p), self.parent_frame, self.translation, self.rotation_xyzw)


def resolve_calibration_path(name_or_path: str) -> Path:
    """A camera calibration by path, or by name in the repository's calibration/ folder."""
    path = Path(name_or_path).expanduser()
    return path if path.suffix else CALIBRATION_DIR / f"{name_or_path}.yaml"


def _matrix(data: dict, key: str, shape: tuple[int, int] | None, path: Path) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in data[key]["data"])
        rows, cols = int(data[key]["rows"]), int(data[key]["cols"])
    except (KeyError, TypeError, ValueError):
        raise CalibrationError(f"{path}: '{key}' needs rows, cols and data") from None
    if len(values) != rows * cols or (shape and (rows, cols) != shape):
        raise CalibrationError(f"{path}: '{key}' is {rows}x{cols} with {len(values)} values; expected {shape}")
    return values


def load_camera_calibration(name_or_path: str) -> CameraCalibration:
    path = resolve_calibration_path(name_or_path)
    if not path.is_file():
        raise CalibrationError(f"camera calibration file not found: {path}")
    data = yaml.safe_load(path.read_text()) or {}
    try:
        width, height = int(data["image_width"]), int(data["image_height"])
    except (KeyError, TypeError, ValueError):
        raise CalibrationError(f"{path}: needs integer image_width and image_height") from None
    k = _matrix(data, "camera_matrix", (3, 3), path)
    if k[0] <= 0 or k[4] <= 0:
        raise CalibrationError(f"{path}: focal lengths must be positive, got fx={k[0]} fy={k[4]}")
    extrinsics = data.get("extrinsics") or {}
    return CameraCalibration(
        camera_name=str(data.get("camera_name", path.stem)), width=width, height=height,
        distortion_model=str(data.get("distortion_model", "plumb_bob")),
        k=k, d=_matrix(data, "distortion_coefficients", None, path),
        r=_matrix(data, "rectification_matrix", (3, 3), path), p=_matrix(data, "projection_matrix", (3, 4), path),
        parent_frame=str(extrinsics.get("parent_frame", "")),
        translation=tuple(float(v) for v in extrinsics.get("translation", (0.0, 0.0, 0.0))),
        rotation_xyzw=tuple(float(v) for v in extrinsics.get("rotation_xyzw", (0.0, 0.0, 0.0, 1.0))),
    )
