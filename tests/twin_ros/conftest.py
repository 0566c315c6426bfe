"""A simulated leader (and follower) bus with calibration files, a rig file pointing at them, and a helper
that runs `sgvla launch hardware ...` on the test's loopback-only domain.

The simulated buses run in a process of their own (`sgvla sim-bus`), as a real arm's servos answer from their
own hardware."""

import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from sgvla.so101.hardware.calibration import write_arm_calibration
from sgvla.so101.hardware.sim_bus import sim_calibration
from sgvla.paths import REPO_ROOT



@pytest.fixture
def calibration_dir(tmp_path) -> Path:
    folder = tmp_path / "calibration"
    for arm_id in ("so101_follower", "so101_leader"):
        write_arm_calibration(folder / f"{arm_id}.json", sim_calibration())  # as `sgvla sim-bus` writes them
    return folder


@pytest.fixture
def sim_buses(tmp_path):
    """Ports of `sgvla sim-bus`'s follower and leader (a hand moving it: slow sines about the middle), served by a
    process of their own: a reply thread in this process competes for the GIL with whatever earlier tests of a long
    session left running here (after tests/hardware/test_recording.py, replies missed LeRobot's 50 ms timeout)."""
    proc = subprocess.Popen([sys.executable, "-m", "sgvla.cli", "sim-bus", "--calibration-dir", str(tmp_path / "bus")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ports = {}
        while len(ports) < 2:
            line = proc.stdout.readline()
            assert line, f"sgvla sim-bus ended early: {ports}"
            if line.startswith(("follower port:", "leader port:")):
                ports[line.split()[0]] = line.split()[-1]
        yield SimpleNamespace(**ports)
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
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if not line.startswith(("Svt", "x265"))]
    proc.log = "\n".join(lines)
    # For assertion messages: the launch's own lines (which node exited early) and the log's tail.
    proc.summary = "\n".join([line for line in lines if line.startswith("sgvla launch")] + ["..."]) + proc.log[-3500:]
    return proc
