"""Real random-weight LeRobot policies (ACT, SmolVLA) loaded and stepped as lerobot_eval does; pi0 and pi05 (which
LeRobot cannot build tiny) checked up to their weights: type, processors, local tokenizer and prompt budgets."""

import gc
import logging

import numpy as np
import psutil
import pytest
import torch

from sgvla.core.protocols import StepInput
from sgvla.policies import lerobot_vla
from sgvla.policies.lerobot_vla import LeRobotPolicy, PromptMeter
from sgvla.policies.registry import make_policy
from sgvla.policies.tiny import CHUNK, STATE_DIM, TOKENIZER_DIR
from sgvla.policies.weights import WeightsError

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


# -- pi0 and pi05: everything but the weights ----------------------------------------------------------------------

PI_BUDGETS = {"pi0": 48, "pi05": 200}
FULL_SIZE_MEMORY = 32 * 2**30  # a random full-size pi0/pi05 is about 4e9 float32 parameters (15 GiB)


def pi_processors(path) -> tuple:
    """The checkpoint's config and policy/env preprocessors, loaded as `LeRobotPolicy` loads them, without the model."""
    from lerobot.configs import PreTrainedConfig
    from lerobot.envs.factory import make_env_pre_post_processors
    from lerobot.policies import make_pre_post_processors

    cfg = PreTrainedConfig.from_pretrained(path, cli_overrides=["--device=cpu"])
    overrides = {"device_processor": {"device": "cpu"}, "rename_observations_processor": {"rename_map": {}}}
    preprocessor, _ = make_pre_post_processors(policy_cfg=cfg, pretrained_path=path, preprocessor_overrides=overrides)
    env_preprocessor, _ = make_env_pre_post_processors(env_cfg=lerobot_vla.libero_env_config(), policy_cfg=cfg)
    return cfg, preprocessor, env_preprocessor


@pytest.mark.parametrize("kind", sorted(PI_BUDGETS))
def test_pi_processors_load_offline_and_cut_at_the_real_budget(kind, weightless_pi_dirs, libero_observations,
                                                              make_prompt):
    from lerobot.envs.utils import preprocess_observation
    from lerobot.utils.constants import OBS_LANGUAGE_ATTENTION_MASK, OBS_LANGUAGE_TOKENS

    path = weightless_pi_dirs[kind]
    cfg, preprocessor, env_preprocessor = pi_processors(path)
    assert cfg.type == kind and cfg.tokenizer_max_length == PI_BUDGETS[kind]
    meter = PromptMeter.of(preprocessor, torch.zeros(1, STATE_DIM))
    assert meter.step.tokenizer_name == str(path / TOKENIZER_DIR)  # inside the checkpoint, not PaliGemma's hub id
    tokenizer = meter.step.input_tokenizer

    budget = meter.budget(make_prompt("full"))
    assert budget.budget == PI_BUDGETS[kind] and budget.truncated
    assert budget.triplets_kept < budget.triplets_total == 42
    assert not meter.budget(make_prompt(None)).truncated

    text = meter.tokenizer_input(make_prompt(None))
    if kind == "pi0":
        assert text == make_prompt(None) + "\n"
    else:  # pi05 writes the quantile-normalized state, in 256 bins, into its prompt
        task, state = text.removeprefix("Task: ").removesuffix(";\nAction: ").split(", State: ")
        assert task == make_prompt(None) and state.split() == ["128"] * STATE_DIM  # zero: the middle bin

    # One LIBERO observation as LeRobotPolicy prepares it: <bos>, the prompt, <pad> up to the budget.
    observation = preprocess_observation(lerobot_vla._batched(libero_observations(1)[0]))
    observation["task"] = [make_prompt(None)]
    batch = preprocessor(env_preprocessor(observation))
    tokens, mask = batch[OBS_LANGUAGE_TOKENS], batch[OBS_LANGUAGE_ATTENTION_MASK]
    assert tokens.shape == mask.shape == (1, PI_BUDGETS[kind]) and mask.dtype == torch.bool
    n = int(mask.sum())
    assert tokens[0, 0] == tokenizer.bos_token_id and n > len(make_prompt(None).split())
    assert torch.all(tokens[0, n:] == tokenizer.pad_token_id) and not mask[0, n:].any()
    assert tokenizer.decode(tokens[0, :n], skip_special_tokens=True).startswith(
        make_prompt(None) if kind == "pi0" else "Task: " + make_prompt(None))


def test_pi_checkpoints_are_checked_by_type_before_their_weights(weightless_pi_dirs, monkeypatch):
    def load_weights(**_):
        raise AssertionError("reached the weights")

    monkeypatch.setattr(lerobot_vla, "make_policy", load_weights)  # LeRobot's loader, as sgvla's module holds it
    for given, held in (("pi0", "pi05"), ("pi05", "pi0")):
        with pytest.raises(ValueError, match=f"holds a '{held}' policy"):
            make_policy(given, path=str(weightless_pi_dirs[held]))
    for kind, path in weightless_pi_dirs.items():
        for given in (kind, "lerobot"):
            with pytest.raises(WeightsError, match="model.safetensors: missing: the checkpoint has no weights"):
                make_policy(given, path=str(path))  # LeRobot would load it as random weights
            with pytest.raises(AssertionError, match="reached the weights"):
                make_policy(given, path=str(path), random_weights=True)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(PI_BUDGETS))
def test_full_size_random_pi_steps(kind, weightless_pi_dirs, libero_observations, make_prompt):
    if psutil.virtual_memory().available < FULL_SIZE_MEMORY:
        pytest.skip(f"a random full-size {kind} needs about {FULL_SIZE_MEMORY // 2**30} GiB free")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    policy = make_policy(kind, path=str(weightless_pi_dirs[kind]), device=device, random_weights=True)
    prompt = make_prompt("full")
    actions = run(policy, prompt, libero_observations(3))
    assert actions.shape == (3, 7) and np.all(np.isfinite(actions))
    assert policy.prompt_budget(prompt).budget == PI_BUDGETS[kind]
    assert "pick up the black bowl" in policy.received.kept
    del policy
    gc.collect()
