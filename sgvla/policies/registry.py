"""Policies by name: a `PolicySpec` names a type, `make_policy_from_spec` builds it from the registry.

A factory takes the spec plus keyword context from the evaluation (LeRobot policies read `env_cfg`;
scripted policies may read others) and returns a `Policy`. Register new types with
`@register_policy("name")`. Importing this module is cheap: LeRobot loads only when a LeRobot
policy is made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sgvla.core.protocols import Policy


@dataclass
class PolicySpec:
    type: str  # a POLICY_REGISTRY key, e.g. "pi05"
    path: str | None = None  # hub id or local directory, for learned policies
    device: str = "cpu"
    max_prompt_tokens: int | None = None  # overrides the tokenizer's max length (an experiment; see LeRobotPolicy)
    name: str | None = None  # shown in reports; defaults per policy type


PolicyFactory = Callable[..., Policy]
POLICY_REGISTRY: dict[str, PolicyFactory] = {}

# The checkpoint's config.json names its LeRobot type; these names check it. "lerobot" takes any type.
LEROBOT_TYPES = ("act", "smolvla", "pi0", "pi05")


def register_policy(*types: str) -> Callable[[PolicyFactory], PolicyFactory]:
    def register(factory: PolicyFactory) -> PolicyFactory:
        for name in types:
            if name in POLICY_REGISTRY:
                raise ValueError(f"policy type {name!r} is already registered")
            POLICY_REGISTRY[name] = factory
        return factory

    return register


def make_policy_from_spec(spec: PolicySpec, **context: Any) -> Policy:
    factory = POLICY_REGISTRY.get(spec.type)
    if factory is None:
        raise ValueError(f"unknown policy type {spec.type!r}; known types: {', '.join(sorted(POLICY_REGISTRY))}")
    return factory(spec, **context)


@register_policy(*LEROBOT_TYPES, "lerobot")
def make_lerobot_policy(spec: PolicySpec, *, env_cfg: Any = None, **_context: Any) -> Policy:
    """A LeRobot checkpoint; the spec's type must match its config unless the type is "lerobot"."""
    if not spec.path:
        raise ValueError(f"policy type {spec.type!r} needs a path: a hub id (owner/name) or a local directory")
    from sgvla.policies.lerobot_vla import LeRobotPolicy

    return LeRobotPolicy(spec.path, device=spec.device, max_prompt_tokens=spec.max_prompt_tokens, name=spec.name,
                         env_cfg=env_cfg, policy_type=None if spec.type == "lerobot" else spec.type)
