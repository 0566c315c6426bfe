"""Simulator fixtures: offline, headless, and backends shared by (task, options) within this folder.

Building a LIBERO scene costs seconds (MuJoCo compiles its meshes), so tests share backends
through `backends(task_id, **options)` and reset them with their own seeds. A backend holds about 1 GB (its
models, renderer and robosuite's state): the folder's tests ask for some 25 (task, options) pairs, which kept for
the whole session held over 10 GB of `make test`'s 24. So at most `KEEP` live at once (the least recently used one
is closed; no test holds more than three), and all are closed when the folder's tests are done (`pytest_runtest_teardown`).
"""

import os
from collections import OrderedDict
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("MUJOCO_GL", "egl")

import pytest  # noqa: E402

SMALL = 64  # image size of tests that render


KEEP = 4  # backends alive at once
HERE = Path(__file__).parent
_cache: OrderedDict = OrderedDict()  # (task, options) -> backend, least recently used first


def _close_all() -> None:
    while _cache:
        _cache.popitem(last=False)[1].close()


@pytest.fixture(scope="session")
def backends():
    from sgvla.libero.env import make_backend

    def get(task_id: int, **options):
        key = (task_id, tuple(sorted(options.items())))
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
        while len(_cache) >= KEEP:
            _cache.popitem(last=False)[1].close()
        options.setdefault("render_profile", "fast")
        options.setdefault("image_size", SMALL)
        _cache[key] = make_backend(task_id, **options)
        return _cache[key]

    yield get
    _close_all()


def pytest_runtest_teardown(item, nextitem):
    """Close the backends once the next test is not one of this folder's (pytest's package scope does not end with
    a folder that is not a Python package)."""
    if nextitem is None or HERE not in Path(nextitem.path).parents:
        _close_all()
