"""A simulated leader (and follower) bus with calibration files, a rig file pointing at them, and a helper
that runs `sgvla launch hardware ...` on the test's loopback-only domain.

The simulated servos answer from a thread of the test process; as in tests/hardware, the GIL is handed
over sooner so that a reply never misses LeRobot's 50 ms packet timeout on a loaded machine."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sgvla.hardware.calibration import write_arm_calibration
from sgvla.hardware.sim_bus import SimFeetechBus, leader_motion, sim_calibration
from sgvla.paths import REPO_ROOT

sys.setswitchinterval(1e-4)


@pytest.fixture
def calibration_dir(tmp_path) -> Path:
    folder = tmp_path / "calibration"
    for arm_id in ("so101_follower", "so101_leader"):
        write_arm_calibration(folder / f"{arm_id}.json", sim_calibration())  # as `sgvla sim-bus` writes them
    return folder


@pytest.fixture
def leader_bus():
    with SimFeetechBus(motion=leader_motion) as bus:  # a hand moving the leader: slow sines about the middle
        yield bus


def rig_file(tmp_path: Path, base: str, **changes) -> Path:
    """config/hardware/<base>.yaml with top-level sections replaced, written into tmp_path."""
    data = yaml.safe_load((REPO_ROOT / "config" / "hardware" / f"{base}.yaml").read_text())
    data.update(changes)
    path = tmp_path / f"{base}_rig.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def sgvla_launch(args: list[str], env: dict, domain_id: int, timeout_s: float) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "sgvla.cli", "launch", "hardware", *args, "--domain-id", str(domain_id)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    proc.log = "\n".join(line for line in (proc.stdout + proc.stderr).splitlines()
                         if not line.startswith(("Svt", "x265")))  # video encoder chatter
    return proc
