"""Step and render rate of the SO101 twin next to the LIBERO backend (fast render profile), in one run.

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_twin.py [--steps 30] [--task 0]

A step is the backend's ``step``: physics for one control period (twin: 1/30 s of 2 ms steps;
LIBERO: 25 substeps of OSC control) and both cameras rendered into the observation. Both run their
scripted expert's actions, recorded once without images. The twin runs at the recording resolution
(640x480, the calibration files' size) and at the LIBERO fast profile's image size; "physics" is
the step without rendering, "render" one camera image alone.
"""

import argparse
import time

import numpy as np

from bench_sim import expert_actions  # benchmarks/ is on sys.path when a benchmark runs as a script

from sgvla.libero.env import BackendConfig, make_backend
from sgvla.so101.twin.backend import TwinBackend


def twin_actions(task: int, steps: int) -> list[np.ndarray]:
    backend = TwinBackend(task, render_images=False)
    try:
        backend.reset(0)
        controller = backend.pick_place(*backend.episode_info()["goal"])
        actions = []
        for _ in range(steps):
            actions.append(controller.act(backend.scene()))
            backend.step(actions[-1])
        return actions
    finally:
        backend.close()


def ms_per_step(backend, actions: list[np.ndarray]) -> float:
    backend.reset(0)
    backend.step(actions[0])  # warm-up: renderers and caches
    start = time.perf_counter()
    for action in actions[1:]:
        backend.step(action)
    return 1000 * (time.perf_counter() - start) / (len(actions) - 1)


def twin_row(task: int, image_size: int | None, actions: list[np.ndarray]) -> tuple[float, float, float]:
    """(ms per step with both cameras, ms per step without images, ms per camera image); ``image_size``
    None renders at the twin config's size (640x480)."""
    backend = TwinBackend(task, image_size=image_size, render_images=True)
    try:
        step_ms = ms_per_step(backend, actions)
        start = time.perf_counter()
        for _ in range(10):
            backend.twin.render("agentview")
        render_ms = 100 * (time.perf_counter() - start)
    finally:
        backend.close()
    blind = TwinBackend(task, render_images=False)
    try:
        physics_ms = ms_per_step(blind, actions)
    finally:
        blind.close()
    return step_ms, physics_ms, render_ms


def libero_row(task: int, size: int, actions: list[np.ndarray]) -> tuple[float, float, float]:
    with make_backend(task, render_profile="fast", image_size=size) as backend:
        step_ms = ms_per_step(backend, actions)
        start = time.perf_counter()
        for _ in range(10):
            backend.sim.render(camera_name="agentview", width=size, height=size)
        render_ms = 100 * (time.perf_counter() - start)
    with make_backend(task, render_profile="fast", image_size=size, render_images=False) as backend:
        physics_ms = ms_per_step(backend, actions)
    return step_ms, physics_ms, render_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", type=int, default=0, help="task id of both (twin 0..4, LIBERO 0..9)")
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    fast_size = BackendConfig(task_id=args.task).image_size
    rows = {
        f"LIBERO fast {fast_size}x{fast_size}": libero_row(args.task, fast_size, expert_actions(args.task, args.steps)),
    }
    actions = twin_actions(args.task, args.steps)
    rows[f"twin {fast_size}x{fast_size}"] = twin_row(args.task, fast_size, actions)
    rows["twin 640x480"] = twin_row(args.task, None, actions)
    base = rows[f"LIBERO fast {fast_size}x{fast_size}"]
    print(f"task {args.task}, {args.steps} scripted steps, 2 cameras per step")
    print(f"{'backend':<22} {'step ms':>8} {'steps/s':>8} {'physics ms':>10} {'render ms':>9}   "
          f"{'step vs LIBERO':>14} {'physics vs':>10} {'render vs':>9}")
    for name, (step, physics, render) in rows.items():
        print(f"{name:<22} {step:>8.1f} {1000 / step:>8.1f} {physics:>10.1f} {render:>9.1f}   "
              f"{base[0] / step:>13.2f}x {base[1] / physics:>9.2f}x {base[2] / render:>8.2f}x", flush=True)
    print("ratios > 1: the twin is faster than the LIBERO fast profile")


if __name__ == "__main__":
    main()
