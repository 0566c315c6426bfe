"""Where the repository's data folders are, for an editable install (the supported layout)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO_ROOT / "config"
URDF_DIR = REPO_ROOT / "urdf"
CALIBRATION_DIR = REPO_ROOT / "calibration"
