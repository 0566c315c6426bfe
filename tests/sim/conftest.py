"""Simulator fixtures: offline, headless, and one backend per (task, options) for the whole session.

Building a LIBERO scene costs seconds (MuJoCo compiles its meshes), so tests share backends
through `backends(task_id, **options)` and reset them with their own seeds.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("MUJOCO_GL", "egl")

import pytest  # noqa: E402

SMALL = 64  # image size of tests that render


@pytest.fixture(scope="session")
def backends():
    from sgvla.libero.env import make_backend

    cache = {}

    def get(task_id: int, **options):
        key = (task_id, tuple(sorted(options.items())))
        if key not in cache:
            options.setdefault("render_profile", "fast")
            options.setdefault("image_size", SMALL)
            cache[key] = make_backend(task_id, **options)
        return cache[key]

    yield get
    for backend in cache.values():
        backend.close()
