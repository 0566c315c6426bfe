"""A simulated leader (and follower) bus with calibration files, a rig file pointing at them, and a helper
that runs `sgvla launch hardware ...` on the test's loopback-only domain.

The simulated leader runs in a process of its own (`sgvla sim-bus`); a follower bus that a test serves itself
answers from a thread of the test process, and as in tests/hardware the GIL is handed over sooner so that a
reply never misses LeRobot's 50 ms packet timeout on a loaded machine."""

import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from sgvla.hardware.calibration import write_arm_calibration
from sgvla.hardware.sim_bus import sim_calibration
from sgvla.paths import REPO_ROOT

sys.setswitchinterval(1e-4)


@pytest.fixture
def calibration_dir(tmp_path) -> Path:
    folder = tmp_path / "calibration"
    for arm_id in ("so101_follower", "so101_leader"):
        write_arm_calibration(folder / f"{arm_id}.json", sim_calibration())  # as `sgvla sim-bus` writes them
    return folder


@pytest.fixture
def leader_bus(tmp_path):
    """`sgvla sim-bus`'s leader (a hand moving it: slow sines about the middle), served by a process of its own:
    a reply thread in this process competes for the GIL with whatever earlier tests of a long session left
    running here, and LeRobot waits 50 ms for a reply (the full suite lost every leader reply this way)."""
    proc = subprocess.Popen([sys.executable, "-m", "sgvla.cli", "sim-bus", "--calibration-dir", str(tmp_path / "bus")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        while not any(line.startswith("leader port:") for line in lines):
            line = proc.stdout.readline()
            assert line, f"sgvla sim-bus ended: {''.join(lines)}"
            lines.append(line)
        yield SimpleNamespace(port=next(line for line in lines if line.startswith("leader port:")).split()[-1])
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


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
