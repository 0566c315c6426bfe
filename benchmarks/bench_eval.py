"""Evaluation speed, measured side by side in one run.

1. Per-step overhead of the live graph (scene state, ground truth for one view, prompt text)
   against the environment step, for a rendered LIBERO-Spatial episode (target: < 2 ms and
   < 1% of the step).
2. Episodes per hour of the prompt-grounded policy, fast vs reference render profile (images
   rendered, as a learned policy needs), and --workers 1 vs 2.

    .venv/bin/python benchmarks/bench_eval.py [--steps 100] [--episodes 4]
"""

import argparse
import tempfile
import time

import numpy as np

import sgvla.plugins  # noqa: F401
from sgvla.core.config import from_mapping
from sgvla.core.context import context_mode
from sgvla.eval.config import EvalConfig
from sgvla.eval.runner import run_plan
from sgvla.scene_graph import load_ontology
from sgvla.libero.env import make_backend


def overhead(steps: int, profile: str) -> dict:
    ontology = load_ontology("libero_spatial")
    mode = context_mode("scene_graph")
    backend = make_backend(0, render_profile=profile, image_size=256)
    backend.reset(0)
    rng = np.random.default_rng(0)
    t_env, t_scene, t_graph, t_prompt = [], [], [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        backend.step(rng.uniform(-0.2, 0.2, 7))
        t1 = time.perf_counter()
        scene = backend.scene()
        t2 = time.perf_counter()
        view = backend.ground_truth(["agentview"], scene=scene)["agentview"]
        t3 = time.perf_counter()
        mode.context(backend.task, view, "agentview", ontology)
        t4 = time.perf_counter()
        t_env.append(t1 - t0), t_scene.append(t2 - t1), t_graph.append(t3 - t2), t_prompt.append(t4 - t3)
    backend.close()
    med = {k: 1000 * float(np.median(v)) for k, v in
           {"env step": t_env, "scene state": t_scene, "ground truth": t_graph, "prompt": t_prompt}.items()}
    med["graph+prompt"] = med["scene state"] + med["ground truth"] + med["prompt"]
    return med


def episodes_per_hour(profile: str, workers: int, episodes: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        cfg = from_mapping(EvalConfig, dict(
            name=f"{profile}-w{workers}",
            suite={"type": "libero_spatial", "render_profile": profile, "image_size": 256},
            policies=[{"type": "prompt_grounded"}], tasks=[0, 5], perturbations="table7",
            modes=["standard", "scene_graph"], episodes=max(1, episodes // 4), workers=workers,
            render_images=True, output_dir=out))  # render every step, as a VLA needs
        t0 = time.perf_counter()
        run_plan(cfg, progress=False)
        n = 2 * 2 * cfg.episodes
        return 3600 * n / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--episodes", type=int, default=4)
    args = parser.parse_args()
    print(f"## Per-step cost (median of {args.steps} steps, 256x256, agentview + wrist rendered)\n")
    print("| profile | env step (ms) | scene state (ms) | ground truth (ms) | prompt (ms) | graph+prompt (ms) | overhead |")
    print("|---|---|---|---|---|---|---|")
    for profile in ("reference", "fast"):
        m = overhead(args.steps, profile)
        print(f"| {profile} | {m['env step']:.2f} | {m['scene state']:.3f} | {m['ground truth']:.3f} | "
              f"{m['prompt']:.3f} | {m['graph+prompt']:.3f} | {100 * m['graph+prompt'] / m['env step']:.2f}% |")
    print(f"\n## Episodes per hour (prompt-grounded policy, tasks 0 and 5, {args.episodes} episodes per cell)\n")
    print("| profile | workers 1 | workers 2 | speed-up |")
    print("|---|---|---|---|")
    for profile in ("reference", "fast"):
        one, two = (episodes_per_hour(profile, w, args.episodes) for w in (1, 2))
        print(f"| {profile} | {one:.0f} | {two:.0f} | {two / one:.2f}x |")


if __name__ == "__main__":
    main()
