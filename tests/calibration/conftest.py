"""Calibration tests render their ChArUco images with MuJoCo, headless."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
