"""Run an evaluation plan in process, as `sgvla eval` with one worker does, recording what the equivalence
test compares: every record, every action (float64) and the final end-effector position per episode.

    python tests/ros/inprocess_episodes.py PLAN.yaml OUT.npz
"""

import json
import os
import sys

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")

import sgvla.plugins  # noqa: E402,F401
from sgvla.core.config import load_config  # noqa: E402
from sgvla.eval.config import EvalConfig  # noqa: E402
from sgvla.eval.runner import Worker, check_weights, plan  # noqa: E402


def main(config: str, out: str) -> None:
    cfg = load_config(EvalConfig, config)
    check_weights(cfg)  # as sgvla eval does before its first episode: the records carry the weights' provenance
    worker = Worker(cfg)
    actions: list = []
    records, arrays = [], {}
    for name in worker.configs:
        policy = worker.policy(name)
        act = policy.act

        def logged(step, act=act):
            action = act(step)
            actions.append(np.array(action, dtype=np.float64))
            return action

        policy.act = logged
    try:
        for i, key in enumerate(plan(cfg)):
            actions.clear()
            records.append(worker.run(key))
            arrays[f"actions_{i}"] = np.stack(actions) if actions else np.zeros((0, 7))
            arrays[f"eef_{i}"] = np.array(worker.backend.scene().eef_pos, dtype=np.float64)
    finally:
        worker.close_backend()
    np.savez(out, records=np.array(json.dumps(records)), **arrays)


if __name__ == "__main__":
    main(*sys.argv[1:])
