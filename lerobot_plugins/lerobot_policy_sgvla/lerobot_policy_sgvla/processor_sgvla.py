"""The processors of the scripted types: none. The policies read the env's privileged state as it arrives (bytes,
exact in float32) and return actions in the backend's units, float64, which no step may normalise or cast."""

from __future__ import annotations

from lerobot.processor import make_policy_processor_pipelines

from lerobot_policy_sgvla.configuration_sgvla import SgvlaExpertConfig, SgvlaPromptGroundedConfig


def _identity_pipelines():
    return make_policy_processor_pipelines(input_steps=[], output_steps=[])


def make_sgvla_expert_pre_post_processors(config: SgvlaExpertConfig, dataset_stats=None):
    return _identity_pipelines()


def make_sgvla_prompt_grounded_pre_post_processors(config: SgvlaPromptGroundedConfig, dataset_stats=None):
    return _identity_pipelines()
