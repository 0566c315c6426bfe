"""The rig: which ports, calibration ids, cameras, control rate and safety limits (config/hardware/*.yaml)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgvla.core.config import load_config
from sgvla.so101.hardware.cameras import CameraConfig
from sgvla.so101.hardware.safety import SafetyConfig
from sgvla.paths import CONFIG_DIR

HARDWARE_CONFIG_DIR = CONFIG_DIR / "hardware"


@dataclass
class ArmConfig:
    port: str = "/dev/ttyACM0"
    id: str = "so101"  # calibration id: <calibration_dir>/<id>.json
    calibration_dir: str = ""  # "" = where lerobot-calibrate writes (see sgvla.so101.hardware.calibration)
    read_retries: int = 2  # extra attempts of each bus read (LeRobot's) before it counts as failed
    # A failed read is tried again until the bus has failed this long; then the arm faults. A host that stops
    # running the reader or the serial line's kernel work for a moment is not a broken arm (a loaded VM stopped
    # both simulated buses of a teleoperation for ~1 s), and the servos hold their last goal meanwhile.
    fault_after_s: float = 2.0

    def __post_init__(self):
        if self.read_retries < 0:  # (a whole number: the config loader converts to the field's type)
            raise ValueError(f"read_retries must be a whole number >= 0, got {self.read_retries!r}")
        if not 0.0 <= self.fault_after_s <= 10.0:
            raise ValueError(f"fault_after_s must be 0 to 10 s (0: fault after the first failed read), "
                             f"got {self.fault_after_s!r}")


@dataclass
class HardwareConfig:
    follower: ArmConfig = field(default_factory=lambda: ArmConfig(port="/dev/ttyACM0", id="so101_follower"))
    leader: ArmConfig = field(default_factory=lambda: ArmConfig(port="/dev/ttyACM1", id="so101_leader"))
    cameras: list[CameraConfig] = field(default_factory=list)
    control_rate_hz: float = 30.0  # also the dataset fps
    safety: SafetyConfig = field(default_factory=SafetyConfig)

    def __post_init__(self):
        names = [c.name for c in self.cameras]
        if len(set(names)) != len(names):
            raise ValueError(f"cameras: names must be unique, got {names}")
        if self.control_rate_hz <= 0:
            raise ValueError("control_rate_hz must be > 0")


def load_hardware_config(name_or_path: str, overrides: Mapping[str, Any] | None = None) -> HardwareConfig:
    """A rig by path, or by name in config/hardware/ (``so101`` -> config/hardware/so101.yaml)."""
    path = Path(name_or_path)
    if not path.suffix:
        path = HARDWARE_CONFIG_DIR / f"{name_or_path}.yaml"
    return load_config(HardwareConfig, path, overrides)
