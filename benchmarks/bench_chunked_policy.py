"""A learned SO101 policy slower than the control period: the command stream with inference in the loop vs in a
background thread (`sgvla.so101.learned.ChunkedActor`), side by side.

    python benchmarks/bench_chunked_policy.py [--seconds 6] [--dataset DIR]

A tiny random-weight ACT (chunks of 10 goals) is built from the features of an SO101-twin demo dataset (one
scripted episode of `sgvla demos generate --suite so101_twin` at 64x48, made in a temporary folder unless
`--dataset` names one). A 30 Hz control loop asks for one goal per tick, with inference padded to 1, 3 and 6
control periods (`min_inference_s`). "inline" computes the next chunk in the loop when the current one runs out
(what a synchronous rollout does); "background" is ChunkedActor (the next chunk asked for with half of the current
one left). Printed per row: commands per second, command interval p50 / p99 / max, and ticks that held the last
goal because no fresh one had come.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MUJOCO_GL", "egl")

from sgvla.so101.hardware.joints import JOINTS  # noqa: E402
from sgvla.so101.learned import ChunkedActor, So101Checkpoint, So101Observation  # noqa: E402

RATE_HZ = 30.0


def observation_of(dataset: Path) -> tuple[So101Observation, str]:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    frame = LeRobotDataset("local/so101_twin_demos", root=dataset)[20]
    images = {k.removeprefix("observation.images."): (frame[k].permute(1, 2, 0).numpy() * 255).astype(np.uint8)
              for k in frame if k.startswith("observation.images.")}
    return So101Observation(dict(zip(JOINTS, frame["observation.state"].tolist())), images), frame["task"]


def run_loop(goal_of, seconds: float) -> np.ndarray:
    """Tick at RATE_HZ for `seconds`; the times at which each tick's goal was ready."""
    period, times = 1.0 / RATE_HZ, []
    start = next_tick = time.monotonic()
    t = 0
    while time.monotonic() - start < seconds:
        if goal_of(t) is not None:
            times.append(time.monotonic())
        t += 1
        next_tick += period
        time.sleep(max(0.0, next_tick - time.monotonic()))
        if time.monotonic() - next_tick > period:  # fell behind: resync, as the recorder's loop does
            next_tick = time.monotonic()
    return np.array(times)


def inline(checkpoint: So101Checkpoint, observation, task):
    """Goals from chunks computed in the loop when the last one is played out: never held, but the loop waits."""
    queue: list = []

    def goal_of(t):
        if not queue:
            queue.extend(checkpoint.chunk(observation, task))
        return queue.pop(0)
    return goal_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--dataset", type=Path, default=None, help="an SO101 LeRobot dataset (default: made here)")
    args = parser.parse_args()
    from sgvla.policies.tiny import build_tiny_act

    with tempfile.TemporaryDirectory(prefix="bench_chunked_") as tmp:
        dataset = args.dataset
        if dataset is None:
            dataset = Path(tmp) / "demos"
            subprocess.run([sys.executable, "-m", "sgvla.cli", "demos", "generate", "--suite", "so101_twin", "--tasks",
                            "0", "--episodes", "1", "--image-size", "64x48", "--out", str(dataset)], check=True,
                           capture_output=True)
        policy = build_tiny_act(Path(tmp) / "act", dataset=dataset)
        observation, task = observation_of(dataset)
        period = 1.0 / RATE_HZ
        print(f"control period {1000 * period:.1f} ms, chunks of 10 goals, {args.seconds:g} s per row")
        print(f"{'inference':>10} {'loop':>11} {'cmd/s':>6} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'held':>5}")
        for periods in (1, 3, 6):
            checkpoint = So101Checkpoint(policy, min_inference_s=periods * period)
            checkpoint.chunk(observation, task)  # warm up
            actor = ChunkedActor(checkpoint, task)
            rows = [("inline", inline(checkpoint, observation, task), None),
                    ("background", lambda t, a=actor: a.tick(t, lambda: observation), actor.stats)]
            for name, goal_of, stats in rows:
                times = run_loop(goal_of, args.seconds)
                times = times[times >= times[0] + 0.5]  # after the first chunk
                gaps = np.diff(times)
                p50, p99 = np.percentile(gaps, [50, 99])
                held = "-" if stats is None else stats.held
                rate = len(gaps) / (times[-1] - times[0])
                print(f"{periods:>2} x {1000 * periods * period:>3.0f}ms {name:>11} {rate:6.1f} {1000 * p50:7.1f} "
                      f"{1000 * p99:7.1f} {1000 * gaps.max():7.1f} {held:>5}")
            actor.close()


if __name__ == "__main__":
    main()
