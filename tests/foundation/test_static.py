"""Every Python file passes pyflakes' rules (ruff ``F``): an undefined name is found here, not by a user.

A missing ``import sys`` in a command's error path once passed every test that did not reach that path.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # starts processes (tests/tiers.py)

ROOT = Path(__file__).resolve().parents[2]


def test_no_undefined_names_or_unused_imports():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is in requirements.txt; run scripts/install.sh"
    paths = ["sgvla", "nodes", "launch", "scripts", "benchmarks", "tests", "ros2_ws/src/sgvla_ros"]
    done = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", *paths],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
