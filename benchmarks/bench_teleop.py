"""Teleoperation and recording speed through the simulated SO101 bus.

    python benchmarks/bench_teleop.py [--seconds 10] [--record-seconds 10]

The simulated follower and leader run in a separate process (`sgvla sim-bus`), as real servos run
on their own hardware; this process runs the same TeleopRecorder loop as `sgvla record`.

1. Control loop at 30 Hz, not recording: leader read -> safety -> follower read and write each
   tick; period p50/p99/max and the rate achieved.
2. Recording one episode with two synthetic 640x480 cameras at 30 fps (agent view with aligned
   depth, wrist): frames written per second of episode, camera frames recorded twice (repeated)
   or never (skipped), loop period while recording, and the time the episode save takes
   (PNG staging is written during the episode by LeRobot's image writer threads; the videos are
   encoded at save).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from sgvla.so101.hardware.arm import FollowerArm, LeaderArm  # noqa: E402
from sgvla.so101.hardware.cameras import Camera, CameraConfig  # noqa: E402
from sgvla.so101.hardware.config import ArmConfig  # noqa: E402
from sgvla.so101.hardware.recording import QUIT, EpisodeStore, KeyQueue, TeleopRecorder, dataset_features  # noqa: E402
from sgvla.so101.hardware.safety import SafetyConfig  # noqa: E402

FPS = 30


def start_sim_bus(folder: Path) -> tuple[subprocess.Popen, str, str]:
    proc = subprocess.Popen([sys.executable, "-m", "sgvla.cli", "sim-bus", "--calibration-dir", str(folder)],
                            stdout=subprocess.PIPE, text=True)
    ports = {}
    for line in proc.stdout:
        key, _, value = line.partition(":")
        ports[key.strip()] = value.strip()
        if key.startswith("leader port"):
            return proc, ports["follower port"], ports["leader port"]
    raise RuntimeError("sgvla sim-bus did not print its ports")


def periods_row(name: str, periods: list[float], extra: str = "") -> str:
    ms = np.array(periods[1:]) * 1e3
    return (f"{name:<34} {len(ms):>6} {np.percentile(ms, 50):>8.2f} {np.percentile(ms, 99):>8.2f} "
            f"{ms.max():>8.2f} {1e3 / ms.mean():>8.1f}  {extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="teleoperation without recording")
    parser.add_argument("--record-seconds", type=float, default=10.0, help="length of the recorded episode")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_teleop_"))
    sim, follower_port, leader_port = start_sim_bus(tmp / "calibration")
    follower = FollowerArm(ArmConfig(follower_port, "so101_follower", str(tmp / "calibration")), SafetyConfig())
    leader = LeaderArm(ArmConfig(leader_port, "so101_leader", str(tmp / "calibration")))
    cameras = [Camera(CameraConfig("agentview", "synthetic", width=640, height=480, fps=FPS, depth=True)),
               Camera(CameraConfig("wrist", "synthetic", width=640, height=480, fps=FPS))]
    try:
        follower.connect()
        leader.connect()
        for camera in cameras:
            camera.start()
        features = dataset_features({c.config.name: (480, 640, c.config.depth) for c in cameras})
        store = EpisodeStore(tmp / "dataset", "local/bench", FPS, features)

        keys = KeyQueue()
        threading.Timer(args.seconds, keys.put, [QUIT]).start()
        teleop = TeleopRecorder(follower, leader, cameras, store, "bench", FPS, keys, 1, episode_time_s=1e9).run()

        recording = TeleopRecorder(follower, leader, cameras, store, "bench", FPS, KeyQueue(), 1,
                                   episode_time_s=args.record_seconds, auto_start=True).run()
        store.close()
    finally:
        for closeable in (*cameras, leader, follower):
            closeable.close()
        sim.terminate()

    loop = recording.periods[:-1]  # the last tick saved the episode
    written = recording.frames / args.record_seconds
    print(f"SO101 teleoperation through the simulated bus (separate process), target {FPS} Hz\n")
    print(f"{'loop':<34} {'ticks':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'Hz':>8}")
    print(periods_row("teleoperation only", teleop.periods))
    print(periods_row("teleoperation + 2 cameras recording", loop))
    print()
    print(f"{'recording, 640x480 x2 (+depth)':<34} {'frames':>6} {'frames/s':>8} {'repeated':>8} {'skipped':>8} "
          f"{'save s':>8}")
    for name in recording.repeated:
        print(f"{'  camera ' + name:<34} {recording.frames:>6} {written:>8.1f} {recording.repeated[name]:>8} "
              f"{recording.skipped[name]:>8} {recording.save_seconds[0]:>8.1f}")


if __name__ == "__main__":
    main()
