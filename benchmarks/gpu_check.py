"""The prepared GPU check: a full-size random pi05 served to 8, 16 and 32 LIBERO workers, episodes per hour.

    python benchmarks/gpu_check.py [--workers 8,16,32] [--episodes-per-worker 1] [--max-steps 60]
    python benchmarks/gpu_check.py --dry-run     # the same machinery on the CPU: tiny SmolVLA, 1 and 2 workers

For a session lent a GPU (the `device` tool): one command, at most about 10 minutes. The policy is LeRobot's pi05
at full size (PaliGemma gemma_2b, expert gemma_300m, 4.14e9 parameters; LeRobot's chunks of 50 and 10 denoising
steps) in bfloat16 on CUDA, with random weights
on purpose (``random_weights: true``: a weightless checkpoint built here offline, `sgvla.policies.tiny`), so the
numbers measure the machinery (LIBERO workers, the batching policy server, pi05's forward pass), not a policy. A
random policy fails every episode, so each runs to `--max-steps`.

For each worker count the plan (LIBERO-Spatial task 0, standard prompt, `workers x episodes-per-worker` seeds) runs
through `run_plan` with one policy server (``policy_server: {serve: learned, max_batch: workers}``). Printed per
count: episodes, wall seconds (server start-up included), episodes/hour from the wall time, "steady" episodes/hour
(workers / mean episode time), steps/hour, and the server's batch sizes; beside them the anchor, ~6,700
episodes/hour of the public vla-eval harness on one H100 (its LIBERO runs: full-length episodes, so compare
steps/hour at equal episode length, or run with `--max-steps 220`).

Without CUDA it refuses in one line (exit 2), unless `--dry-run`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MUJOCO_GL", "egl")

ANCHOR_EPISODES_PER_HOUR = 6700  # the public vla-eval harness, LIBERO, one H100
SUITE = {"type": "libero_spatial", "render_profile": "fast"}


def policy_entry(root: Path, dry_run: bool) -> dict:
    """The plan's policy: a full-size random pi05 on CUDA, or (dry run) a tiny saved SmolVLA on the CPU."""
    from sgvla.policies.tiny import build_tiny_smolvla, build_weightless_pi05

    if dry_run:
        return {"type": "smolvla", "path": str(build_tiny_smolvla(root / "smolvla")), "device": "cpu"}
    path = build_weightless_pi05(root / "pi05", dtype="bfloat16", lerobot_defaults=True)
    return {"type": "pi05", "path": str(path), "device": "cuda", "random_weights": True}


def run_once(policy: dict, workers: int, episodes: int, max_steps: int, out: Path, image_size: int) -> dict:
    import sgvla.plugins  # noqa: F401  (the plan names registered suites and policies)
    from sgvla.core.config import from_mapping
    from sgvla.eval.config import EvalConfig
    from sgvla.eval.runner import run_plan

    cfg = from_mapping(EvalConfig, dict(
        name=f"gpu-check-w{workers}", suite={**SUITE, "image_size": image_size}, policies=[policy], tasks=[0],
        perturbations="ambiguous_prompt", modes=["standard"], episodes=episodes, max_steps=max_steps,
        workers=workers, output_dir=str(out), policy_server={"serve": "learned", "max_batch": workers}))
    start = time.perf_counter()
    summary = run_plan(cfg, progress=False)
    wall = time.perf_counter() - start
    results = out / "episodes.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines()] if results.is_file() else []
    failures = sorted({r["reason"] for r in summary.outstanding.values()})
    return {"workers": workers, "episodes": len(records), "wall_s": wall, "failures": failures,
            "steps": sum(r["steps"] for r in records), "episode_s": [r["wall_time_s"] for r in records],
            "batches": next(iter(summary.policy_server.values()), {})}


def row(r: dict) -> str:
    import numpy as np

    per_hour = 3600 * r["episodes"] / r["wall_s"]
    steady = 3600 * r["workers"] / float(np.mean(r["episode_s"])) if r["episode_s"] else float("nan")
    steps_h = 3600 * r["steps"] / r["wall_s"]
    sizes = r["batches"].get("batch_sizes", {})
    batches = ", ".join(f"{size}: {n}" for size, n in sizes.items()) or "-"
    return (f"| {r['workers']} | {r['episodes']} | {r['wall_s']:.0f} | {per_hour:,.0f} | {steady:,.0f} | "
            f"{steps_h:,.0f} | {ANCHOR_EPISODES_PER_HOUR:,} | {batches} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default=None, help="comma-separated worker counts (default 8,16,32; dry run 1,2)")
    parser.add_argument("--episodes-per-worker", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=None, help="steps per episode (default 60; dry run 3)")
    parser.add_argument("--dry-run", action="store_true", help="the machinery on the CPU with a tiny SmolVLA")
    args = parser.parse_args(argv)

    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here (torch.cuda.is_available() is False); run it on a machine lent a GPU, "
              "or with --dry-run for the CPU path", file=sys.stderr)
        return 2
    workers = [int(w) for w in (args.workers or ("1,2" if args.dry_run else "8,16,32")).split(",")]
    max_steps = args.max_steps or (3 if args.dry_run else 60)
    device = "CPU (dry run)" if args.dry_run else torch.cuda.get_device_name(0)
    print(f"gpu_check on {device}: {'tiny SmolVLA' if args.dry_run else 'full-size random pi05, bfloat16'}, "
          f"workers {workers}, {args.episodes_per_worker} episode(s) per worker, {max_steps} steps each")
    with tempfile.TemporaryDirectory(prefix="sgvla-gpu-check-") as tmp:
        root = Path(tmp)
        policy = policy_entry(root, args.dry_run)
        rows = []
        for w in workers:
            r = run_once(policy, w, w * args.episodes_per_worker, max_steps, root / f"run_w{w}",
                         image_size=64 if args.dry_run else 256)
            rows.append(r)
            print(f"  {w} workers: {r['episodes']} episodes in {r['wall_s']:.0f} s", flush=True)
            if r["failures"]:
                print(f"gpu_check: the run with {w} workers had infrastructure failures: {r['failures'][0][:300]}",
                      file=sys.stderr)
                return 1
    print("\n| workers | episodes | wall s | episodes/h | steady episodes/h | steps/h | vla-eval anchor episodes/h "
          "(1 H100) | server batch sizes (size: count) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(row(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
