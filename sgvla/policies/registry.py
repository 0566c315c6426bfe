"""Policies by registered config: a plan names a policy type and its options; `PolicyConfig.make` builds it.

    policies: [{type: prompt_grounded}, {type: smolvla, path: lerobot/smolvla_libero, device: cuda}]

A new policy type is one config class registered with ``@PolicyConfig.register("name")`` whose ``make`` returns
a `Policy` (sgvla.core.protocols). Importing this module is cheap: LeRobot loads only when a LeRobot policy is
made. Scripted policies register in ``sgvla.policies.scripted``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from sgvla.core.protocols import BatchPolicy, Policy
from sgvla.core.registry import Choice
from sgvla.scene_graph import Ontology


@dataclass
class PolicyConfig(Choice, kind="policy"):
    name: str | None = None  # shown in reports and episode keys; defaults per policy type
    # A part of the plan for this policy alone: at most this many of the plan's tasks and seeds (the first ones; None:
    # all). A sanity arm (the privileged expert beside the policy under test) needs few episodes; counts, not task
    # ids, so that a plan's tasks overridden on the command line (tasks=[3]) still leave it its part.
    max_tasks: int | None = None
    max_episodes: int | None = None

    learned: ClassVar[bool] = False  # reads camera images and the robot state (a LeRobot checkpoint)
    needs_scene: ClassVar[bool] = False  # reads the privileged scene (scripted policies)
    reads_goal: ClassVar[bool] = False  # reads the true goal: the prompt cannot change it (a sanity arm, not under test)

    @property
    def display_name(self) -> str:
        return self.name or self.type

    def runs(self, task_index: int, seed_index: int) -> bool:
        """Whether this policy runs the plan's episodes of its `task_index`-th task with its `seed_index`-th seed."""
        return (self.max_tasks is None or task_index < self.max_tasks) and \
            (self.max_episodes is None or seed_index < self.max_episodes)

    def make(self, *, ontology: Ontology, env_config: Any = None) -> Policy:
        """The policy; `env_config` is the embodiment's LeRobot env config (learned policies' processors)."""
        raise NotImplementedError

    def check_weights(self) -> None:
        """Refuse (WeightsError, one line) before the first episode unless the policy's weights are what it says."""

    def record_facts(self) -> dict[str, Any]:
        """What each record of this policy's episodes carries about it (the weights' provenance)."""
        return {}

    def make_batch(self, *, ontology: Ontology, env_config: Any = None) -> BatchPolicy:
        """The policy as a policy server hosts it, serving many episodes at once. By default an instance per
        episode (right for policies without weights); learned policies share one model."""
        from sgvla.policies.serving.batch import PerSession

        return PerSession(lambda: self.make(ontology=ontology, env_config=env_config), self.display_name)


@dataclass
class LeRobotPolicyConfig(PolicyConfig):
    """A LeRobot checkpoint (hub id or directory); its config must hold `checkpoint_type` unless that is None.

    Its weights are checked before the first episode (`sgvla.policies.weights`): every parameter from the
    checkpoint's model.safetensors, or, with `random_weights`, none (a folder without weights, built at random on
    purpose: tests, benchmarks). The check fills `weights_sha256` (and `weights_revision` for a hub id), so the run's
    plan keeps them; given in the plan, they pin the weights (a different file is refused)."""

    path: str = ""
    device: str = "cpu"
    threads: int = 2  # torch CPU threads, fixed so every executor rounds alike (sgvla.policies.checkpoint.use_threads)
    max_prompt_tokens: int | None = None  # overrides the tokenizer's max length (an experiment; see LeRobotPolicy)
    random_weights: bool = False  # the checkpoint holds no weights: evaluate a randomly initialised model, marked so
    weights_sha256: str | None = None  # model.safetensors' SHA-256: filled by the check, or given to pin it
    weights_revision: str | None = None  # the hub commit the weights came from (a hub id's checkpoint)

    learned: ClassVar[bool] = True
    checkpoint_type: ClassVar[str | None] = None

    def __post_init__(self) -> None:
        if not self.path:
            raise ValueError(f"policy type {self.type!r} needs a path: a hub id (owner/name) or a local directory")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1 (torch's CPU threads for the policy), got {self.threads}")
        if self.max_prompt_tokens is not None and self.max_prompt_tokens < 1:
            raise ValueError(f"max_prompt_tokens must be >= 1 (or unset), got {self.max_prompt_tokens}")

    @property
    def display_name(self) -> str:
        return self.name or f"{self.type}:{Path(self.path).name}"

    def make(self, *, ontology: Ontology, env_config: Any = None) -> Policy:
        if hasattr(env_config, "make_policy"):  # an embodiment that loads checkpoints its own way (the SO101)
            return env_config.make_policy(self)
        from sgvla.policies.lerobot_vla import LeRobotPolicy

        return LeRobotPolicy(self.path, device=self.device, max_prompt_tokens=self.max_prompt_tokens,
                             name=self.name, env_cfg=env_config, policy_type=self.checkpoint_type,
                             random_weights=self.random_weights, weights_sha256=self.weights_sha256,
                             threads=self.threads)

    def check_weights(self) -> None:
        from sgvla.policies.weights import checked_config

        if getattr(self, "_provenance", None) is None:
            _, self._provenance = checked_config(self.path, self.device, self.checkpoint_type, self.random_weights,
                                                 self.weights_sha256)
            self.weights_sha256, self.weights_revision = self._provenance.sha256, self._provenance.revision

    def record_facts(self) -> dict[str, Any]:
        provenance = getattr(self, "_provenance", None)
        if provenance is None:  # not checked in this process (a plan run without `check_weights`): what is known
            return {"weights_source": self.path, "weights_sha256": self.weights_sha256,
                    "weights_revision": self.weights_revision, "random_weights": self.random_weights}
        return provenance.record_facts()

    def make_batch(self, *, ontology: Ontology, env_config: Any = None) -> BatchPolicy:
        policy = self.make(ontology=ontology, env_config=env_config)
        if not hasattr(policy, "act_batch"):
            raise TypeError(f"{type(policy).__name__} ({self.display_name}) cannot serve several episodes at once")
        return policy


def _checkpoint_config(policy_type: str, class_name: str) -> type[LeRobotPolicyConfig]:
    """The registered config of one LeRobot policy type: a checkpoint that must hold that type. `class_name` is the
    module attribute it is bound to: pickle finds a class by module and name, so a plan holding it reaches worker
    processes (a name that is not the attribute's fails there with PicklingError)."""
    namespace = {"checkpoint_type": policy_type, "__doc__": f"A LeRobot {policy_type} checkpoint.", "__module__": __name__,
                 "__qualname__": class_name}
    return PolicyConfig.register(policy_type)(dataclass(type(class_name, (LeRobotPolicyConfig,), namespace)))


ACTConfig = _checkpoint_config("act", "ACTConfig")
SmolVLAConfig = _checkpoint_config("smolvla", "SmolVLAConfig")
Pi0Config = _checkpoint_config("pi0", "Pi0Config")
Pi05Config = _checkpoint_config("pi05", "Pi05Config")


@PolicyConfig.register("lerobot")
@dataclass
class AnyLeRobotConfig(LeRobotPolicyConfig):
    """Any LeRobot policy type: the checkpoint's config says which."""


def policy_config(type: str, **options: Any) -> PolicyConfig:
    """A registered policy config by type name (a clear error listing the types otherwise)."""
    return PolicyConfig.choice(type)(**options)


def make_policy(type: str, ontology: Ontology | None = None, env_config: Any = None, **options: Any) -> Policy:
    """`policy_config(type, **options).make(...)`; the ontology defaults to LIBERO-Spatial's."""
    from sgvla.scene_graph import load_ontology

    return policy_config(type, **options).make(ontology=ontology or load_ontology("libero_spatial"),
                                               env_config=env_config)
