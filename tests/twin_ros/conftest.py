"""A simulated leader (and follower) bus with calibration files, a rig file pointing at them, and a helper
that runs `sgvla launch hardware ...` on the test's loopback-only domain.

The simulated buses are served by `sgvla sim-bus`, which the launched nodes reach by port path, as they would an
arm plugged into the machine. Learned policies: a twin demo dataset and tiny random-weight checkpoints built from
its features (session fixtures)."""

import os
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

from ..waiting import wait_until


@pytest.fixture
def calibration_dir(tmp_path) -> Path:
    folder = tmp_path / "calibration"
    for arm_id in ("so101_follower", "so101_leader"):
        write_arm_calibration(folder / f"{arm_id}.json", sim_calibration())  # as `sgvla sim-bus` writes them
    return folder


@pytest.fixture
def sim_buses(tmp_path):
    """Ports of `sgvla sim-bus`'s follower and leader (a hand moving it: slow sines about the middle). Its output goes
    to a file (a pipe nobody reads would fill and block it); Ctrl-C ends it, as a user would, and it must end cleanly
    (each of its buses is a process of its own, which it reaps)."""
    log = tmp_path / "sim_bus.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "sgvla.cli", "sim-bus", "--calibration-dir",
                                 str(tmp_path / "bus")], stdout=out, stderr=subprocess.STDOUT)
    try:
        def both_ports() -> dict[str, str]:
            found = {line.split(":")[0]: line.split()[-1] for line in log.read_text().splitlines()
                     if line.startswith(("follower port:", "leader port:"))}
            return found if len(found) == 2 else {}
        ports = wait_until(both_ports, 120, "sgvla sim-bus's two ports", logs=[log], procs=[proc])
        yield SimpleNamespace(follower=ports["follower port"], leader=ports["leader port"])
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    text = log.read_text()
    print(text[-2000:])  # ends with its buses' health: shown beside a failing test's own output
    assert code == 0 and "leader bus:" in text, f"sgvla sim-bus ended with {code}:\n{text[-3000:]}"


def twin_cameras(size: tuple[int, int], fps: int, wrist_size: tuple[int, int] | None = None) -> list[dict]:
    """The twin rig's two cameras rendered by the twin: agentview (color + depth) and wrist, (width, height) each."""
    (width, height), (wrist_w, wrist_h) = size, wrist_size or size
    return [{"name": "agentview", "source": "twin", "device": "agentview", "width": width, "height": height,
             "fps": fps, "depth": True},
            {"name": "wrist", "source": "twin", "device": "wrist", "width": wrist_w, "height": wrist_h, "fps": fps}]


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


# Learned SO101 policies: a twin demo dataset (`sgvla demos generate --suite so101_twin`, the layout `sgvla record`
# writes) and tiny random-weight checkpoints built from its features, once per test session.
LEARNED_ENV = {**os.environ, "MUJOCO_GL": "egl", "HF_HUB_OFFLINE": "1"}
DEMO_WIDTH, DEMO_HEIGHT = 64, 48
RATE_HZ = 30.0


def sgvla_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`sgvla ARGS` in a child process; `.log` holds its output without the video encoders' banner lines."""
    proc = subprocess.run([sys.executable, "-m", "sgvla.cli", *args], env=LEARNED_ENV, capture_output=True, text=True,
                          timeout=timeout)
    proc.log = "\n".join(line for line in (proc.stdout + proc.stderr).splitlines()
                         if not line.startswith(("Svt", "x265")))
    return proc


@pytest.fixture(scope="session")
def demos(tmp_path_factory):
    root = tmp_path_factory.mktemp("demos") / "so101_twin"
    done = sgvla_cli("demos", "generate", "--suite", "so101_twin", "--tasks", "0", "--episodes", "1", "--image-size",
                     f"{DEMO_WIDTH}x{DEMO_HEIGHT}", "--out", str(root))
    assert done.returncode == 0, done.log[-4000:]
    return root


@pytest.fixture(scope="session")
def tiny_act(demos, tmp_path_factory):
    from sgvla.policies.tiny import build_tiny_act

    return build_tiny_act(tmp_path_factory.mktemp("act") / "act", dataset=demos)


@pytest.fixture(scope="session")
def tiny_smolvla(demos, tmp_path_factory):
    from sgvla.policies.tiny import build_tiny_smolvla

    return build_tiny_smolvla(tmp_path_factory.mktemp("smolvla") / "smolvla", dataset=demos)
