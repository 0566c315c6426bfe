"""Real random-weight LeRobot policies (ACT, SmolVLA) loaded and stepped as lerobot_eval does."""

import logging

import numpy as np
import pytest

from sgvla.core.protocols import StepInput
from sgvla.policies.lerobot_vla import LeRobotPolicy
from sgvla.policies.registry import make_policy
from sgvla.policies.tiny import CHUNK

STEPS = CHUNK + 2  # crosses an action-chunk boundary, so the model runs twice


def run(policy, prompt: str, observations: list[dict]) -> np.ndarray:
    policy.reset(prompt)
    return np.stack([policy.act(StepInput(observation=obs, prompt=prompt)) for obs in observations])


@pytest.fixture(scope="module")
def smolvla(tiny_smolvla_dir):
    return make_policy("smolvla", path=str(tiny_smolvla_dir))


def test_act_steps_and_ignores_the_prompt(tiny_act_dir, libero_observations, make_prompt):
    policy = make_policy("act", path=str(tiny_act_dir), name="tiny-act")
    observations = libero_observations(STEPS)
    std = run(policy, make_prompt(None), observations)
    sg = run(policy, make_prompt("full"), observations)
    assert policy.name == "tiny-act"
    assert std.shape == (STEPS, 7) and std.dtype == np.float32
    assert np.all(np.abs(std) <= 1.0)  # LIBERO's action space
    # ACT has no language input: the scene graph cannot change what it does.
    np.testing.assert_array_equal(std, sg)
    assert policy.prompt_budget(make_prompt("full")) is None
    assert policy.received is None and policy.decision() == {}


def test_smolvla_receives_the_prompt_cut_at_its_budget(smolvla, libero_observations, make_prompt):
    prompt = make_prompt("filtered")
    actions = run(smolvla, prompt, libero_observations(STEPS))
    assert actions.shape == (STEPS, 7) and np.all(np.isfinite(actions)) and np.all(np.abs(actions) <= 1.0)

    received = smolvla.received
    assert received.text == prompt + "\n"  # SmolVLA's processor ends the task with a newline
    assert received.text.startswith(received.kept) and len(received.kept) < len(received.text)

    budget = smolvla.prompt_budget(prompt)
    tokenizer = smolvla.meter.step.input_tokenizer
    assert budget.budget == 48 and budget.truncated
    assert budget.tokens == len(tokenizer(received.text)["input_ids"])
    assert len(tokenizer(received.kept)["input_ids"]) == budget.budget
    lines = prompt.splitlines()[4:]
    assert budget.triplets_total == len(lines) == 6
    assert budget.triplets_kept == sum(line in received.kept for line in lines) < budget.triplets_total
    assert smolvla.decision() == {}


def test_standard_prompt_fits(smolvla):
    budget = smolvla.prompt_budget("pick up the black bowl on the stove and place it on the plate")
    assert not budget.truncated and budget.tokens < budget.budget
    assert (budget.triplets_total, budget.triplets_kept) == (0, 0)


def test_raised_budget_lets_the_whole_graph_through(tiny_smolvla_dir, libero_observations, make_prompt):
    policy = LeRobotPolicy(tiny_smolvla_dir, max_prompt_tokens=4096)
    prompt = make_prompt("full")
    run(policy, prompt, libero_observations(1))
    budget = policy.prompt_budget(prompt)
    assert budget.budget == 4096 and not budget.truncated
    assert budget.triplets_kept == budget.triplets_total == 42
    assert policy.received.kept == policy.received.text == prompt + "\n"


def test_truncation_warns_once_per_policy(tiny_smolvla_dir, make_prompt, caplog):
    policy = LeRobotPolicy(tiny_smolvla_dir)
    with caplog.at_level(logging.WARNING, logger="sgvla.policies.lerobot_vla"):
        for graph in ("filtered", "full", "full"):
            policy.prompt_budget(make_prompt(graph))
    warnings = [r for r in caplog.records if "truncates its prompt" in r.getMessage()]
    assert len(warnings) == 1 and "budget 48" in warnings[0].getMessage()
