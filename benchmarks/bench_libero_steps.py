"""LIBERO-Spatial steps per second and scripted-regression episodes per hour, before vs after, in one run.

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_libero_steps.py [--steps 80] [--repeats 3] [--episodes 2] [--workers 2]

Before: LeRobot's env stepped as it comes (`lean_step: false`) and, with images, the fast profile drawing the
full meshes. After: lean stepping (sgvla.libero.stepping: the same results bit for bit) and decimated render
meshes. 1. ms per `LiberoBackend.step` of task 0 with the scripted expert's actions (recorded once): without
images (what a regression run steps) and with the two 128 px cameras. 2. Episodes per hour of a scripted
regression plan (`sgvla eval`'s runner: expert on tasks 0 and 3, standard and scene_graph, --episodes seeds,
render_images false, fast profile, --workers processes), from the run's wall time including start-up; the two
runs' records are compared without their timing fields (they must be identical).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_sim import expert_actions  # benchmarks/ is on sys.path when a benchmark runs as a script

TIMING_FIELDS = {"wall_time_s", "context_ms_per_step"}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def ms_per_step(actions: list[np.ndarray], lean: bool, images: bool, decimated: bool) -> float:
    from sgvla.libero.env import make_backend

    with make_backend(0, render_profile="fast", image_size=128, render_images=images, lean_step=lean) as backend:
        backend.env.profile = dataclasses.replace(backend.env.profile, decimated_meshes=decimated)
        backend.reset(0)
        backend.step(actions[0])  # warm-up
        start = time.perf_counter()
        for action in actions[1:]:
            backend.step(action)
        return 1000 * (time.perf_counter() - start) / (len(actions) - 1)


def regression(lean: bool, episodes: int, workers: int, out: Path) -> tuple[float, list[dict]]:
    import sgvla.plugins  # noqa: F401  (registers suites and policies)
    from sgvla.core.config import from_mapping
    from sgvla.eval.config import EvalConfig
    from sgvla.eval.runner import run_plan

    cfg = from_mapping(EvalConfig, dict(
        name=f"lean-{lean}", suite={"type": "libero_spatial", "render_profile": "fast", "image_size": 128,
                                    "lean_step": lean},
        policies=[{"type": "expert"}], tasks=[0, 3], perturbations="none", modes=["standard", "scene_graph"],
        episodes=episodes, workers=workers, render_images=False, output_dir=str(out)))
    start = time.perf_counter()
    run_plan(cfg, progress=False)
    wall = time.perf_counter() - start
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    return 3600 * len(records) / wall, records


def comparable(records: list[dict]) -> list[str]:
    return sorted(json.dumps({k: v for k, v in r.items() if k not in TIMING_FIELDS}, sort_keys=True) for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--repeats", type=int, default=3, help="before/after measurements, interleaved; medians")
    parser.add_argument("--episodes", type=int, default=2, help="seeds per task and mode")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    actions = expert_actions(0, args.steps)
    print(f"## ms per step (task 0, {args.steps} expert steps, fast profile, median of {args.repeats} interleaved)\n")
    print("| step | before ms | after ms | before steps/s | after steps/s | speed-up | load avg |")
    print("|---|---|---|---|---|---|---|")
    for label, images in (("no images", False), ("two 128 px cameras", True)):
        # Before and after alternate, and medians are compared: a load that changes during the run (a 2-core
        # machine shared with other work) then weighs on both alike, not on whichever ran second.
        runs = [(ms_per_step(actions, lean=False, images=images, decimated=False),
                 ms_per_step(actions, lean=True, images=images, decimated=True)) for _ in range(args.repeats)]
        before, after = (float(np.median(side)) for side in zip(*runs))
        print(f"| {label} | {before:.1f} | {after:.1f} | {1000 / before:.1f} | {1000 / after:.1f} | "
              f"{before / after:.2f}x | {load_average()} |", flush=True)
    print(f"\n## Scripted regression (expert, tasks 0 and 3, std + sg, {args.episodes} seeds, no images, "
          f"{args.workers} workers)\n")
    with tempfile.TemporaryDirectory() as tmp:
        before, before_records = regression(False, args.episodes, args.workers, Path(tmp) / "before")
        load_before = load_average()
        after, after_records = regression(True, args.episodes, args.workers, Path(tmp) / "after")
        same = comparable(before_records) == comparable(after_records)
    def steady(records: list[dict]) -> float:  # the workers' episodes back to back, start-up left out
        return 3600 * args.workers / float(np.mean([r["wall_time_s"] for r in records]))

    print("| run | episodes/hour (wall time, with start-up) | episodes/hour (episodes alone) | s per episode | "
          "load avg |")
    print("|---|---|---|---|---|")
    for name, rate, records, load in (("before (lean_step false)", before, before_records, load_before),
                                      ("after", after, after_records, load_average())):
        print(f"| {name} | {rate:.0f} | {steady(records):.0f} | "
              f"{np.mean([r['wall_time_s'] for r in records]):.2f} | {load} |")
    print(f"\nspeed-up {after / before:.2f}x with start-up, {steady(after_records) / steady(before_records):.2f}x "
          f"episodes alone; {len(after_records)} episodes, records without timing fields "
          f"{'identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
