"""Small evaluation plans on the real LIBERO simulator (fast rendering, 64-pixel images, a few steps) and their
records, as the tests of tests/eval compare them."""

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sgvla.core.config import from_mapping
from sgvla.core.episode import EpisodeKey
from sgvla.eval.config import EvalConfig
from sgvla.eval.runner import RunSummary, run_plan

from ..sim_eval_tools import TIMING


def small_config(out, **kw) -> EvalConfig:
    base = dict(name="t", suite={"type": "libero_spatial", "render_profile": "fast", "image_size": 64},
                policies=[{"type": "prompt_grounded"}], tasks=[0], perturbations="table7",
                modes=["standard", "scene_graph"], episodes=1, max_steps=15, workers=1, output_dir=str(out))
    return from_mapping(EvalConfig, {**base, **kw})


def records_by_key(out) -> dict:
    """The run's records by episode, without their timing fields; an episode recorded twice fails. Each holds its
    action digest, so two runs whose records are equal acted alike at every step (to the digest's 1e-4 grid)."""
    records = [json.loads(line) for line in (Path(out) / "episodes.jsonl").read_text().splitlines()]
    assert all(len(r.get("action_digest", "")) == 64 for r in records), "a record without its action digest"
    keyed = {EpisodeKey.of(r): {k: v for k, v in r.items() if k not in TIMING} for r in records}
    assert len(keyed) == len(records), "an episode was recorded twice"
    return keyed


def run_with(cfg: EvalConfig, action: Callable[[], bool]) -> RunSummary:
    """`run_plan(cfg)` while a thread runs `action()` once the run has recorded an episode, until `action` says it
    was done (True): how a test kills a server, an actor or a node in the middle of a run."""
    done = threading.Event()

    def watch():
        results = Path(cfg.output_dir) / "episodes.jsonl"
        while not done.is_set():
            if results.is_file() and results.read_text().count("\n") >= 1 and action():
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        return run_plan(cfg, progress=False)
    finally:
        done.set()
        thread.join()
