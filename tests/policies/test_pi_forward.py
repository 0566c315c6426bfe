"""The smallest real pi0 and pi05 LeRobot builds (PaliGemma gemma_2b with a gemma_300m expert, bfloat16, random,
saved with their weights by `sgvla make-tiny-policy pi0|pi05`), stepped on the CPU as `sgvla eval` steps them.

Each is built once per session (8-9 GiB on disk and in memory, minutes on two cores: the slow tier) and loaded
through the weights check; then one chunk of two episodes alone and as one batch (the policy server's path) must
agree within bfloat16 rounding, other seeds draw other noise, and the prompt budget and pi05's state-in-prompt
behave as tests/policies/test_prompt_budget.py and test_lerobot_vla.py establish for the full-size processors.
`benchmarks/bench_pi_forward.py` gives the forward time and memory."""

import gc
import os

import numpy as np
import psutil
import pytest

from sgvla.core.protocols import StepInput
from sgvla.policies.registry import make_policy
from sgvla.sim.heap import release_free_memory

pytestmark = pytest.mark.slow

# LeRobot's load builds the model in float32 before its bfloat16 conversion (15.4 GiB for pi05; the process peaks at
# 18.6 GiB). Beside make test's other xdist worker that is more than this 24 GiB machine can give safely (the first
# run here took 7.5 min, then failed), so make test skips it here; run alone (`pytest tests/policies/test_pi_forward.py`,
# no other worker) it needs the peak and some room.
ALONE = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) <= 1
NEEDS = (20 if ALONE else 24) * 2**30
BUDGETS = {"pi0": 48, "pi05": 200}


@pytest.fixture(scope="session")
def small_pi(tmp_path_factory):
    """kind -> the saved checkpoint, built on first use (one model in memory at a time)."""
    from sgvla.policies.tiny import BUILDERS

    built = {}

    def get(kind: str):
        if kind not in built:
            gc.collect()
            release_free_memory()  # the other kind's model, freed but kept by glibc's arenas
            if psutil.virtual_memory().available < NEEDS:
                pytest.skip(f"building the smallest real {kind} needs about {NEEDS // 2**30} GiB free")
            built[kind] = BUILDERS[kind](tmp_path_factory.mktemp(kind) / kind)
            gc.collect()
        return built[kind]

    return get


@pytest.mark.parametrize("kind", ["pi05", "pi0"])
def test_one_chunk_batched_equals_each_episode_alone(kind, small_pi, libero_observations, make_prompt):
    policy = make_policy(kind, path=str(small_pi(kind)))
    assert policy.provenance.sha256 and not policy.provenance.random  # every parameter from the file
    prompt = make_prompt("full")
    episodes = [(seed, libero_observations(2, seed=seed)) for seed in (0, 1)]  # 2 steps: one forward pass each
    alone = []
    for seed, obs in episodes:
        policy.reset(prompt, seed=seed)
        alone.append(np.stack([policy.act(StepInput(o, prompt)) for o in obs]))
    budget, received = policy.prompt_budget(prompt), policy.received
    sessions = [policy.open_session() for _ in episodes]
    for session, (seed, _) in zip(sessions, episodes):
        policy.reset_session(session, prompt, seed)
    batched = [np.stack(rows) for rows in zip(*[
        policy.act_batch(sessions, [StepInput(obs[t], prompt) for _, obs in episodes]) for t in range(2)])]
    del policy
    gc.collect()

    assert all(a.shape == (2, 7) and np.all(np.isfinite(a)) for a in alone)
    for one, many in zip(alone, batched):
        np.testing.assert_allclose(many, one, atol=0.05 * max(1.0, float(np.abs(one).max())))
    assert not np.allclose(alone[0], alone[1])  # each episode's own noise
    assert budget.budget == BUDGETS[kind] and budget.truncated and budget.triplets_kept < budget.triplets_total
    if kind == "pi05":  # the state, discretized into the prompt, after the task
        assert received.text.startswith("Task: ") and ", State: " in received.text and "Action: " in received.text
    assert received.kept.startswith(("Task: " if kind == "pi05" else "") + "pick up the black bowl")
