"""pi0 and pi05 as the paper evaluates them, run only where their weights and tokenizer are cached.

A GPU user fills the cache once (`huggingface-cli login`, PaliGemma's license accepted on the hub), e.g.
`huggingface-cli download lerobot/pi05_libero_finetuned` and `huggingface-cli download
google/paligemma-3b-pt-224 --include "tokenizer*" "special_tokens_map.json"`; the test itself stays offline.
"""

import numpy as np
import pytest
import torch

from sgvla.core.protocols import StepInput
from sgvla.policies.registry import make_policy

HUB_IDS = {"pi0": "lerobot/pi0_libero_finetuned", "pi05": "lerobot/pi05_libero_finetuned"}
BUDGETS = {"pi0": 48, "pi05": 200}
TOKENIZER = "google/paligemma-3b-pt-224"


def cached(repo: str, filename: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo, filename), str)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(HUB_IDS))
def test_pretrained_policy_steps_and_reports_its_budget(kind, libero_observations, make_prompt):
    if not (cached(HUB_IDS[kind], "model.safetensors") and cached(TOKENIZER, "tokenizer_config.json")):
        pytest.skip(f"{HUB_IDS[kind]} or {TOKENIZER}'s tokenizer is not in the Hugging Face cache")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    policy = make_policy(kind, path=HUB_IDS[kind], device=device)
    prompt = make_prompt("full")
    budget = policy.prompt_budget(prompt)
    assert budget.budget == BUDGETS[kind] and budget.truncated and budget.triplets_kept < budget.triplets_total == 42

    policy.reset(prompt)
    actions = np.stack([policy.act(StepInput(observation=obs, prompt=prompt)) for obs in libero_observations(3)])
    assert actions.shape == (3, 7) and np.all(np.isfinite(actions))
    assert "pick up the black bowl" in policy.received.kept
