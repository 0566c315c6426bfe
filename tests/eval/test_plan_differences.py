"""A run folder's stored plan against the plan that would resume it: settings added to sgvla since the folder was
written (a policy's own `max_tasks`/`max_episodes`, `random_weights`, the weights' provenance) are no difference when the
new plan leaves them at their defaults, so an upgrade never strands a half-done run; a real change still is one,
inside a policy entry too."""

import copy

import sgvla.plugins  # noqa: F401
from sgvla.core.config import from_mapping
from sgvla.eval.config import EvalConfig
from sgvla.eval.run_dir import HARMLESS, plan_differences, stored_settings

PLAN = dict(suite={"type": "libero_spatial", "render_profile": "fast"}, tasks=[0, 1], episodes=2,
            policies=[{"type": "prompt_grounded"}, {"type": "act", "path": "/ckpt/act", "random_weights": True}])


def older(settings: dict, *gone: str) -> dict:
    """`settings` as a version of sgvla that had none of the policy options `gone` stored it."""
    old = copy.deepcopy(settings)
    for policy in old["policies"]:
        for key in gone:
            policy.pop(key, None)
    return old


def test_options_added_since_the_folder_was_written_are_no_difference():
    new = stored_settings(from_mapping(EvalConfig, PLAN))
    assert {"max_tasks", "max_episodes"} <= new["policies"][0].keys()
    new["policies"][1]["weights_sha256"] = "ab" * 32  # filled by the weights check when the plan runs
    old = older(new, "max_tasks", "max_episodes", "weights_sha256", "weights_revision")
    old["policies"][1]["random_weights"] = True  # the act entry said so itself
    assert plan_differences(old, new, HARMLESS) == []


def test_a_real_change_inside_a_policy_entry_is_still_one():
    new = stored_settings(from_mapping(EvalConfig, PLAN))
    old = older(new, "max_tasks", "max_episodes")
    old["policies"][1]["path"] = "/ckpt/other_act"
    old["policies"][0]["max_episodes"] = 1  # stored with a part of the plan, resumed without it
    assert plan_differences(old, new, HARMLESS) == ["policies[0].max_episodes: 1 -> null",
                                                    "policies[1].path: /ckpt/other_act -> /ckpt/act"]
    pinned = copy.deepcopy(new)
    pinned["policies"][1]["weights_sha256"] = "cd" * 32  # a stored hash is compared: other weights are a change
    new["policies"][1]["weights_sha256"] = "ab" * 32
    assert plan_differences(pinned, new, HARMLESS) == [f"policies[1].weights_sha256: {'cd' * 32} -> {'ab' * 32}"]
