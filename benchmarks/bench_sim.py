"""Environment step time of the LIBERO-Spatial backend: reference vs fast render profile, side by side.

    .venv/bin/python benchmarks/bench_sim.py [--task 0] [--steps 40] [--image-size 128,256]

Both profiles run the same task, seed and actions (the scripted expert's, recorded once) in one
process; a step is ``LiberoBackend.step``: 25 physics substeps, OSC control, two camera renders
and LeRobot's observation processing. Image sizes default to 128 (LIBERO's datasets) and LeRobot's
LIBERO config size.
"""

import argparse
import time

import numpy as np

from sgvla.libero.expert import task_expert
from sgvla.libero.env import BackendConfig, make_backend


def expert_actions(task: int, steps: int) -> list[np.ndarray]:
    with make_backend(task, render_images=False) as backend:
        backend.reset(0)
        expert = task_expert(backend.task_info.problem)
        actions = []
        for _ in range(steps):
            actions.append(expert.act(backend.scene()))
            backend.step(actions[-1])
        return actions


def time_profile(task: int, profile: str, size: int, actions: list[np.ndarray]) -> tuple[float, float]:
    """(ms per step, s per reset)."""
    with make_backend(task, render_profile=profile, image_size=size) as backend:
        backend.reset(0)  # the first reset builds the scene
        t = time.perf_counter()
        backend.reset(0)
        reset_s = time.perf_counter() - t
        backend.step(actions[0])  # warm-up
        t = time.perf_counter()
        for action in actions[1:]:
            backend.step(action)
        return 1000 * (time.perf_counter() - t) / (len(actions) - 1), reset_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", type=int, default=0)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--image-size", default=f"128,{BackendConfig(task_id=0).image_size}")
    args = parser.parse_args()
    actions = expert_actions(args.task, args.steps)
    print(f"task {args.task}, {args.steps} expert steps, 2 cameras; ms/step (s/reset)")
    print(f"{'image':>7}  {'reference':>16}  {'fast':>16}  {'speed-up':>8}")
    for size in (int(s) for s in args.image_size.split(",")):
        ref, ref_reset = time_profile(args.task, "reference", size, actions)
        fast, fast_reset = time_profile(args.task, "fast", size, actions)
        print(f"{size:>4} px  {ref:>8.1f} ({ref_reset:>4.1f} s)  {fast:>8.1f} ({fast_reset:>4.1f} s)  {ref / fast:>7.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
