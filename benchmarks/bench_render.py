"""Full vs decimated render meshes, per camera and resolution, side by side in one run.

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_render.py [--repeats 15] [--skip-libero]

SO101 twin: `So101Twin.render` (scene copied and drawn under the twin's lock) with `render_meshes: full` (the
package's meshes) and `decimated` (sgvla.sim.render_meshes), cameras agentview and wrist at 128x128, 256x256,
320x240 (the twin rig's) and 640x480 (the calibration files'). LIBERO-Spatial task 0: the fast profile's renderer
(no shadows, reflections or MSAA) with the full meshes (as before) and with decimated ones, agentview and the
wrist camera at 128 and 256 px, through robosuite's `MjSim.render` as observations are drawn. Median of
--repeats images after one warm-up, at the arm's rest pose / LIBERO's first initial state.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

TWIN_SIZES = ((128, 128), (256, 256), (320, 240), (640, 480))
LIBERO_SIZES = (128, 256)


def median_ms(draw, repeats: int) -> float:
    draw()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        draw()
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times))


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def twin_rows(repeats: int) -> tuple[list[tuple], str]:
    from sgvla.sim.render_meshes import drawn_faces
    from sgvla.so101.twin.config import load_twin_config
    from sgvla.so101.twin.twin import So101Twin

    twins = {m: So101Twin(load_twin_config(overrides={"render_meshes": m})) for m in ("full", "decimated")}
    try:
        rows = []
        for camera in ("agentview", "wrist"):
            for width, height in TWIN_SIZES:
                full, fast = (median_ms(lambda t=twins[m]: t.render(camera, width, height), repeats)
                              for m in ("full", "decimated"))
                rows.append(("SO101 twin", camera, f"{width}x{height}", full, fast))
        faces = f"SO101 twin: {drawn_faces(twins['full'].render_model):,} -> " \
                f"{drawn_faces(twins['decimated'].render_model):,} mesh triangles per image"
    finally:
        for twin in twins.values():
            twin.close()
    return rows, faces


def libero_rows(repeats: int) -> tuple[list[tuple], str]:
    from sgvla.libero.env import make_backend
    from sgvla.sim.render_meshes import drawn_faces

    backends = {}
    for meshes in ("full", "decimated"):
        backend = make_backend(0, render_profile="fast", image_size=max(LIBERO_SIZES))
        backend.env.profile = dataclasses.replace(backend.env.profile, decimated_meshes=meshes == "decimated")
        backend.reset(0)
        backends[meshes] = backend
    try:
        rows = []
        for camera in backends["full"].cameras:
            for size in LIBERO_SIZES:
                full, fast = (median_ms(lambda b=backends[m]: b.sim.render(camera_name=camera, width=size,
                                                                          height=size), repeats)
                              for m in ("full", "decimated"))
                rows.append(("LIBERO fast", camera, f"{size}x{size}", full, fast))
        physics = backends["full"].sim.model._model
        render = backends["decimated"].sim._render_context_offscreen.render_model
        faces = f"LIBERO task 0: {drawn_faces(physics, (0, 1)):,} -> {drawn_faces(render, (0, 1)):,} " \
                "mesh triangles per image"
    finally:
        for backend in backends.values():
            backend.close()
    return rows, faces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--skip-libero", action="store_true")
    args = parser.parse_args()
    before = load_average()
    rows, notes = twin_rows(args.repeats)
    notes = [notes]
    if not args.skip_libero:
        more, note = libero_rows(args.repeats)
        rows += more
        notes.append(note)
    print(f"ms per image (median of {args.repeats}); load average (1/5/15 min) {before} before, "
          f"{load_average()} after")
    print(f"{'scene':<12} {'camera':<20} {'size':>8} {'full ms':>8} {'decimated ms':>12} {'speed-up':>8}")
    for scene, camera, size, full, fast in rows:
        print(f"{scene:<12} {camera:<20} {size:>8} {full:>8.1f} {fast:>12.1f} {full / fast:>7.2f}x")
    print("\n".join(notes))


if __name__ == "__main__":
    main()
