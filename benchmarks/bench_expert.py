"""Success of the scripted privileged expert on LIBERO-Spatial, per task over seeds (no rendering).

    .venv/bin/python benchmarks/bench_expert.py --seeds 10 [--tasks 0,1] [--perturbation none]

Seed ``s`` starts from LIBERO's initial state ``s % 50``; an episode fails at LeRobot's 280-step limit.
"""

import argparse
import time

from sgvla.libero.expert import task_expert
from sgvla.libero.env import make_backend


def run_task(task_id: int, seeds: range, perturbation: str) -> tuple[int, list[int], float]:
    successes, steps = 0, []
    t0 = time.perf_counter()
    with make_backend(task_id, render_images=False, perturbation=perturbation) as backend:
        for seed in seeds:
            backend.reset(seed)
            expert = task_expert(backend.task_info.problem)
            done = success = False
            while not done:
                _, success, done = backend.step(expert.act(backend.scene()))
            successes += success
            steps.append(backend.steps)
    return successes, steps, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--tasks", default="0,1,2,3,4,5,6,7,8,9")
    parser.add_argument("--perturbation", default="none")
    args = parser.parse_args()
    seeds = range(args.seeds)
    total = 0
    tasks = [int(t) for t in args.tasks.split(",")]
    print(f"scripted expert, perturbation={args.perturbation}, seeds 0..{args.seeds - 1}")
    print(f"{'task':>4}  {'success':>9}  {'rate':>6}  {'mean steps':>10}  {'wall s':>7}")
    for task in tasks:
        ok, steps, wall = run_task(task, seeds, args.perturbation)
        total += ok
        print(f"{task:>4}  {ok:>4}/{len(seeds):<4}  {ok / len(seeds):>6.0%}  {sum(steps) / len(steps):>10.1f}  {wall:>7.1f}",
              flush=True)
    n = len(tasks) * len(seeds)
    print(f"{'all':>4}  {total:>4}/{n:<4}  {total / n:>6.0%}")


if __name__ == "__main__":
    main()
