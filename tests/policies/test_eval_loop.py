"""A tiny random-weight SmolVLA through the evaluation loop on the real LIBERO simulator."""

import pytest

from sgvla.policies.lerobot_vla import triplet_spans
from sgvla.policies.registry import PolicySpec

pytestmark = pytest.mark.sim


def test_smolvla_gets_the_live_graph_cut_at_its_budget(tiny_smolvla_dir, tmp_path):
    pytest.importorskip("sgvla.libero.env", reason="the LIBERO backend is not available")
    from sgvla.eval.config import EvalConfig
    from sgvla.eval.loop import Episode
    from sgvla.eval.runner import Worker, policy_name

    spec = PolicySpec(type="smolvla", path=str(tiny_smolvla_dir))
    cfg = EvalConfig(policies=[spec], tasks=[0], modes=["scene_graph"], episodes=1, render_profile="fast",
                     image_size=64, max_steps=3, output_dir=str(tmp_path))
    worker = Worker(cfg)
    record = worker.run(Episode(policy_name(spec), 0, cfg.perturbations, "scene_graph", 0))
    assert record["steps"] == 3 and record["triplets_in_prompt"] > 0
    assert record["prompt_budget"] == 48 and record["prompt_truncated"]
    assert record["prompt_tokens"] > 48 and record["triplets_kept"] < record["triplets_in_prompt"]

    received = worker.policy(policy_name(spec)).received  # the prompt of the last step, as the model got it
    assert received.text.startswith(record["task"] + "\nCurrent simulator semantic context:\nScene graph:\n")
    assert received.text.startswith(received.kept) and len(received.kept) < len(received.text)
    prompt = received.text.removesuffix("\n")
    triplets = [prompt[a:b] for a, b in triplet_spans(prompt)]
    assert triplets and all(t.startswith("(") for t in triplets)
    kept = worker.policy(policy_name(spec)).prompt_budget(prompt).triplets_kept
    assert kept == sum(t in received.kept for t in triplets)
