"""A process that loads LIBERO through sgvla (every worker of `sgvla eval` does) prints neither robosuite's "No
private macro file found!" hint nor LIBERO's "[info] using task orders" line; robosuite's other messages still
print. In a process of its own: both come once per process, at import."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.sim, pytest.mark.integration]  # starts processes (tests/tiers.py)

LOAD_LIBERO = textwrap.dedent("""
    import logging
    logging.basicConfig(level=logging.INFO)  # as `sgvla eval` configures it: the root logger prints too
    from sgvla.libero.tasks import task_info
    print("task 0:", task_info(0).language)
    from sgvla.libero.env import SgvlaLiberoEnv  # LIBERO's robosuite env, robosuite with it
    import robosuite
    logging.getLogger("robosuite_logs").warning("a real robosuite warning")
""")


def test_loading_libero_prints_no_macro_hint_and_no_task_order():
    done = subprocess.run([sys.executable, "-c", LOAD_LIBERO], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MUJOCO_GL": "egl", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "task 0: pick up the black bowl" in done.stdout, done.stdout
    assert "using task orders" not in done.stdout + done.stderr, done.stdout
    for hint in ("No private macro file found!", "It is recommended to use a private macro file", "setup_macros.py"):
        assert hint not in done.stderr, done.stderr
    assert "a real robosuite warning" in done.stderr, done.stderr  # other messages pass
