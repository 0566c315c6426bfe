"""Fiducial perception against the SO101 twin's ground truth over scripted pick-and-place (issue 15.4), in one run:
RGB-D and RGB alone on the same rendered frames, side by side.

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_fiducials.py [--frames 500] [--every 2] [--size 640x480]

Frames are control steps (every ``--every``-th) of the twin's scripted pick-and-place over tasks 0-4 and seeds
0, 1, ... until ``--frames`` are checked; each frame is both cameras (agent view and wrist, the wrist camera placed
by forward kinematics at the twin's joints). Reported per variant: position error of the objects seen in the frame
(median, p95, mm), of the objects held through an occlusion and of those carried unseen in the closed gripper
(medians), seen / held / carried / missing counts, the mean frame
F1 of graphs from perceived poses against the twin's ground-truth graphs per camera, next to the F1 of graphs from
the true poses with the configured extents (what the extents alone allow), and the time of detection, PnP, depth
refinement, fusion and tracking per camera image and per frame, on one core (process pinned to one CPU, OpenCV
single-threaded). Rendering and physics are not timed.
"""

import argparse
import os
import sys
import time

import cv2

from sgvla.so101.perception.fiducials import load_marker_config
from sgvla.so101.twin.config import load_twin_config
from sgvla.so101.twin.fiducial_check import check_episode, summarize


def frames_for(config, markers, total: int, every: int, width: int, height: int, depth: bool):
    frames, episodes = [], []
    seed = 0
    while len(frames) < total:
        for task in range(len(config.tasks)):
            episode = list(check_episode(config, markers, task, seed, width=width, height=height, depth=depth,
                                         every=every))
            frames += episode
            episodes.append((task, seed, len(episode)))
            if len(frames) >= total:
                break
        seed += 1
    return frames, episodes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--every", type=int, default=2, help="check every N-th control step (default 2)")
    parser.add_argument("--size", default="640x480", help="image size WxH (default 640x480)")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    cv2.setNumThreads(1)
    config, markers = load_twin_config(), load_marker_config()
    rows = {}
    for name, depth in (("RGB-D", True), ("RGB", False)):
        start = time.perf_counter()
        frames, episodes = frames_for(config, markers, args.frames, args.every, width, height, depth)
        rows[name] = summarize(frames)
        print(f"{name}: {len(frames)} frames from {len(episodes)} episodes (task, seed, frames) {episodes}, "
              f"{time.perf_counter() - start:.0f} s with rendering", file=sys.stderr)
    views = list(next(iter(rows.values())).f1)
    header = (f"{'variant':8} {'frames':>6} {'median mm':>9} {'p95 mm':>7} {'held mm':>8} {'carry mm':>8} {'seen':>5} "
              f"{'held':>5} {'carry':>5} {'miss':>5} " + " ".join(f"{'F1 ' + v:>13} {'(true)':>7}" for v in views)
              + f" {'ms/image':>8} {'ms/frame':>8} {'Hz/image':>8}")
    print(f"fiducial perception in the twin, {width}x{height}, one core, every {args.every} control steps")
    print(header)
    for name, s in rows.items():
        counts = s.status_counts
        print(f"{name:8} {s.frames:>6} {s.median_mm:>9.2f} {s.p95_mm:>7.2f} {s.held_median_mm:>8.1f} "
              f"{s.carried_median_mm:>8.1f} {counts['seen']:>5} {counts['held']:>5} {counts['carried']:>5} "
              f"{counts['missing']:>5} "
              + " ".join(f"{s.f1[v]:>13.3f} {s.f1_true_poses[v]:>7.3f}" for v in views)
              + f" {s.ms_per_image:>8.2f} {s.ms_per_frame:>8.2f} {1000 / s.ms_per_image:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
