"""The LeRobot config types of sgvla's scripted policies: ``sgvla_expert`` and ``sgvla_prompt_grounded``.

Each names the sgvla policy it runs (`sgvla_policy`, a `sgvla.policies.registry.PolicyConfig` with its options) and
how many steps each decided action is held (`n_action_steps`). With 1 (the default) every step is decided from that
step's scene, as in `sgvla eval`; with n > 1 the policy chunks: it decides on one step's scene and returns that
action n times, each episode from a queue of its own (a chunking policy that still succeeds, so a loop that mixed
episodes' queues, LeRobot issue 4327, would show as lost successes). Nothing is trained: the policies have no
weights and build without a checkpoint (``--policy.type=...``, no ``--policy.path``).
"""

from __future__ import annotations

from dataclasses import dataclass

from lerobot.configs.policies import PreTrainedConfig

import sgvla.plugins  # noqa: F401  every registered sgvla policy and suite
from sgvla.policies.registry import PolicyConfig


@dataclass
class SgvlaScriptedConfig(PreTrainedConfig):
    """What the scripted types share (not a type of its own)."""

    n_action_steps: int = 1  # steps each decided action is held (a chunk of n); 1: decided every step
    device: str | None = "cpu"  # nothing runs on an accelerator
    push_to_hub: bool = False

    sgvla_type = ""  # the sgvla policy type this config runs

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_action_steps < 1:
            raise ValueError(f"n_action_steps must be >= 1, got {self.n_action_steps}")
        self.sgvla_policy()  # its options checked now, with sgvla's message

    def sgvla_policy(self) -> PolicyConfig:
        """The sgvla policy entry this config runs."""
        return PolicyConfig.choice(self.sgvla_type)()

    @property
    def observation_delta_indices(self) -> None:
        return None

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.n_action_steps))

    @property
    def reward_delta_indices(self) -> None:
        return None

    def get_optimizer_preset(self):
        raise NotImplementedError(f"{self.type} is scripted: there is nothing to train")

    def get_scheduler_preset(self):
        return None

    def validate_features(self) -> None:
        """Nothing to check: the policy reads the env's privileged state (`lerobot_env_sgvla.privileged`), not the
        features, and refuses a batch without it when it first acts."""


@PreTrainedConfig.register_subclass("sgvla_expert")
@dataclass
class SgvlaExpertConfig(SgvlaScriptedConfig):
    """sgvla's privileged `expert`: the task's goal object, whatever the prompt says (the upper bound)."""

    sgvla_type = "expert"


@PreTrainedConfig.register_subclass("sgvla_prompt_grounded")
@dataclass
class SgvlaPromptGroundedConfig(SgvlaScriptedConfig):
    """sgvla's `prompt_grounded`: the bowl the prompt (and a scene graph in it) points to."""

    sgvla_type = "prompt_grounded"
    tie_break: str = "random"  # sgvla's option: `random` (seeded by the episode) or `first`

    def sgvla_policy(self) -> PolicyConfig:
        return PolicyConfig.choice(self.sgvla_type)(tie_break=self.tie_break)
