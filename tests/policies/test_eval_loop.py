"""A tiny random-weight SmolVLA through the evaluation loop on the real LIBERO simulator."""

import pytest

import sgvla.plugins  # noqa: F401
from sgvla.core.config import from_mapping
from sgvla.policies.lerobot_vla import triplet_spans

pytestmark = pytest.mark.sim


def test_smolvla_gets_the_live_graph_cut_at_its_budget(tiny_smolvla_dir, tmp_path):
    pytest.importorskip("sgvla.libero.env", reason="the LIBERO backend is not available")
    from sgvla.eval.config import EvalConfig
    from sgvla.eval.runner import Worker, plan

    cfg = from_mapping(EvalConfig, {
        "suite": {"type": "libero_spatial", "render_profile": "fast", "image_size": 64},
        "policies": [{"type": "smolvla", "path": str(tiny_smolvla_dir)}], "tasks": [0], "modes": ["scene_graph"],
        "episodes": 1, "max_steps": 3, "output_dir": str(tmp_path)})
    worker = Worker(cfg)
    (key,) = plan(cfg)
    record = worker.run(key)
    assert record["steps"] == 3 and record["triplets_in_prompt"] > 0
    assert record["prompt_budget"] == 48 and record["prompt_truncated"]
    assert record["prompt_tokens"] > 48 and record["triplets_kept"] < record["triplets_in_prompt"]

    received = worker.policy(key.policy).received  # the prompt of the last step, as the model got it
    assert received.text.startswith(record["task"] + "\nCurrent simulator semantic context:\nScene graph:\n")
    assert received.text.startswith(received.kept) and len(received.kept) < len(received.text)
    prompt = received.text.removesuffix("\n")
    triplets = [prompt[a:b] for a, b in triplet_spans(prompt)]
    assert triplets and all(t.startswith("(") for t in triplets)
    kept = worker.policy(key.policy).prompt_budget(prompt).triplets_kept
    assert kept == sum(t in received.kept for t in triplets)
