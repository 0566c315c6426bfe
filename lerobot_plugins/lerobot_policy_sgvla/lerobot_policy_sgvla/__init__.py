"""sgvla's scripted policies as LeRobot policy types: ``lerobot-eval --env.type=sgvla_libero --env.privileged=true
--policy.type=sgvla_prompt_grounded`` runs the episodes `sgvla eval` runs with `prompt_grounded` (and
``sgvla_expert`` those of `expert`), so a policy that succeeds checks that both loops score alike.

LeRobot imports this package by its distribution name (`register_third_party_plugins`, which `lerobot-eval` calls);
importing it registers the config types (`configuration_sgvla`). LeRobot finds the policy classes in the sibling
`modeling_sgvla` and their processors in `processor_sgvla` by its naming convention (`get_policy_class`,
`make_pre_post_processors`)."""

from lerobot_policy_sgvla.configuration_sgvla import (
    SgvlaExpertConfig,
    SgvlaPromptGroundedConfig,
    SgvlaScriptedConfig,
)

__all__ = ["SgvlaExpertConfig", "SgvlaPromptGroundedConfig", "SgvlaScriptedConfig"]
