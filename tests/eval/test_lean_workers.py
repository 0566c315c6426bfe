"""The import boundary of a simulator worker: a worker process (`sgvla.eval.worker.init_worker` and `run_in_worker` in a
fresh interpreter, as a spawned pool process runs them) whose policies are served or scripted holds no torch, transformers or LeRobot policy code after
running an episode, and stays small: an SO101 twin's worker within 400 MiB resident, a LIBERO-Spatial worker that
renders its two cameras at 64 px (the fast profile: what a served learned policy needs) within 700 MiB (issue 40). What each worker held, its peak resident memory and how long it took to start are printed
(`pytest -s`) for the issue's table.

LIBERO's worker held torch and transformers (1.8 GiB peak) while its backend was LeRobot's `LiberoEnv`, whose module
imports torch (`torch.load` of the initial states) and whose package imports LeRobot's config and processor stack;
sgvla's LIBERO env now steps LIBERO as that env does without importing it (`sgvla.libero.env`)."""

import json
import os
import pickle
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

import sgvla.plugins  # noqa: F401
from sgvla.core.config import from_mapping
from sgvla.eval.config import EvalConfig
from sgvla.eval.order import plan
from sgvla.policies.serving.plan import build_policy_server
from sgvla.policies.serving.local import LocalServer

pytestmark = [pytest.mark.sim, pytest.mark.integration]  # worker and server processes

TWIN_PEAK_MIB = 400  # issue 40's bounds on a worker's resident memory
LIBERO_PEAK_MIB = 700
POLICY_CODE = ("lerobot.policies", "sgvla.policies.lerobot_vla", "sgvla.policies.tiny")


# A pool worker's life in a fresh interpreter (what a spawned pool process does: unpickle the plan, `init_worker`,
# `run_in_worker`), then what it holds: the heavy modules, and its peak and current resident memory (MiB).
WORKER = """
import json, os, pickle, sys
from pathlib import Path

def held():
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers") or m.startswith(POLICY_CODE))
    return {"heavy": heavy, "torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules,
            "policy_code": [m for m in heavy if m.startswith(POLICY_CODE)],
            "peak_mib": int(status["VmHWM"].split()[0]) / 1024, "rss_mib": int(status["VmRSS"].split()[0]) / 1024}

POLICY_CODE = tuple(sys.argv[2].split(","))
cfg, endpoint, key = pickle.loads(Path(sys.argv[1]).read_bytes())
from sgvla.eval.worker import init_worker, run_in_worker
init_worker(cfg, os.getppid(), endpoint)
print("UP " + json.dumps(held()), flush=True)
record = run_in_worker(key)
print("DONE " + json.dumps({**held(), "record": record}), flush=True)
"""


def plan_for(suite: str, out: Path, serve: str) -> EvalConfig:
    suites = {"twin": ({"type": "so101_twin"}, "none", False),
              "libero": ({"type": "libero_spatial", "render_profile": "fast", "image_size": 64}, "table7", True)}
    settings, perturbations, render_images = suites[suite]
    return from_mapping(EvalConfig, dict(
        name=f"lean-{suite}", suite=settings, policies=[{"type": "prompt_grounded"}], tasks=[0],
        perturbations=perturbations, modes=["standard"], episodes=1, max_steps=20, workers=2, render_images=render_images,
        output_dir=str(out / "run"), policy_server={"serve": serve}))


def one_worker(cfg: EvalConfig, folder: Path) -> dict:
    """A worker process runs the plan's first episode (through the plan's policy server when it serves its
    policies); what it held then, with its start-up time (interpreter, imports, `init_worker`, until it answers)."""
    server = LocalServer(partial(build_policy_server, cfg)).start() if cfg.policy_server.serve != "none" else None
    args = folder / "worker_args.pkl"
    args.write_bytes(pickle.dumps((cfg, server.endpoint if server else None, plan(cfg)[0])))
    try:
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", WORKER, str(args), ",".join(POLICY_CODE)],
                                stdout=subprocess.PIPE, text=True, env={**os.environ, "MUJOCO_GL": "egl"})
        lines = {}
        for line in proc.stdout:
            kind, _, body = line.partition(" ")
            if kind in ("UP", "DONE"):
                lines[kind] = (time.monotonic() - started, json.loads(body))
        assert proc.wait(timeout=60) == 0 and "DONE" in lines, f"the worker ended with {proc.returncode}: {lines}"
    finally:
        if server is not None:
            server.stop()
    (startup_s, up), (_, after) = lines["UP"], lines["DONE"]
    record = after["record"]
    print(f"\n{cfg.name} serve={cfg.policy_server.serve}: start-up {startup_s:.1f} s at {up['rss_mib']:.0f} MiB; "
          f"after one episode ({record['steps']} steps) peak {after['peak_mib']:.0f} MiB, now {after['rss_mib']:.0f} "
          f"MiB; torch {after['torch']}, transformers {after['transformers']}, policy code {after['policy_code']}")
    return {**after, "startup_s": startup_s}


@pytest.mark.parametrize("serve", ["all", "none"], ids=["served", "scripted"])
def test_a_twin_worker_holds_no_torch_transformers_or_policy_code_and_stays_small(serve, tmp_path):
    worker = one_worker(plan_for("twin", tmp_path, serve), tmp_path)
    assert worker["record"]["steps"] > 0 and worker["record"]["policy"] == "prompt_grounded"
    assert worker["heavy"] == [], worker["heavy"]
    assert worker["peak_mib"] <= TWIN_PEAK_MIB, worker


@pytest.mark.parametrize("serve", ["all", "none"], ids=["served", "scripted"])
def test_a_libero_worker_holds_no_torch_transformers_or_policy_code_and_stays_small(serve, tmp_path):
    worker = one_worker(plan_for("libero", tmp_path, serve), tmp_path)
    assert worker["record"]["steps"] > 0 and worker["record"]["policy"] == "prompt_grounded"
    assert worker["heavy"] == [], worker["heavy"]
    assert worker["peak_mib"] <= LIBERO_PEAK_MIB, worker
