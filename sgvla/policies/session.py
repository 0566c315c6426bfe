"""The one way a process builds, caches and closes its policies: `PolicySession`.

An evaluation worker, the `vla_policy` node and the `arm_policy` node each run many episodes with a few policies;
each policy is built once per process (a checkpoint loads once) and closed when the process is done with it. A
policy that a policy server hosts (sgvla.policies.serving) is reached through a `RemotePolicy` instead of being
built here: the session is told which names are served and by whom.
"""

from __future__ import annotations

import logging
from typing import Any

from sgvla.core.protocols import Policy
from sgvla.policies.registry import PolicyConfig
from sgvla.policies.serving.remote import PolicyClient, RemotePolicy
from sgvla.scene_graph import load_ontology

log = logging.getLogger(__name__)


class PolicySession:
    """Policies by config, built on first use for a suite (its ontology; learned policies its LeRobot env config)
    and kept until `close`. `served` names the policies a server hosts, reached through `client`."""

    def __init__(self, served: set[str] | frozenset[str] = frozenset(), client: PolicyClient | None = None):
        if served and client is None:
            raise ValueError(f"policies {sorted(served)} are served, but no client reaches their server")
        self.served, self.client = set(served), client
        self._policies: dict[tuple, Policy] = {}

    def get(self, config: PolicyConfig, suite: Any, env_config: Any = None) -> Policy:
        """The policy of `config` on `suite` (built now if this session has none yet). `env_config` replaces the
        suite's LeRobot env config for a learned policy (a node's own settings of the embodiment)."""
        if config.display_name in self.served:
            key: tuple = ("served", config.display_name)
            if key not in self._policies:
                self._policies[key] = RemotePolicy(config.display_name, self.client)
            return self._policies[key]
        if config.learned and env_config is None:
            env_config = suite.lerobot_env_config()
        key = (repr(config), suite.ontology, repr(env_config) if config.learned else None)
        if key not in self._policies:
            self._policies[key] = config.make(ontology=load_ontology(suite.ontology),
                                              env_config=env_config if config.learned else None)
        return self._policies[key]

    def end_served_episodes(self) -> None:
        """Close the server's sessions of the episode that just ended (each served policy's `reset` opens the next
        one's): a server batches the steps of every open session, so one kept open between episodes makes the other
        workers' steps wait for a step that does not come."""
        for key, policy in self._policies.items():
            if key[0] == "served":
                policy.close()

    def __len__(self) -> int:
        return len(self._policies)

    def close(self) -> None:
        """Close every policy (each failure logged, the rest still closed) and the server's connection."""
        for policy in self._policies.values():
            try:
                policy.close()
            except Exception:
                log.warning("closing policy %s failed", policy.name, exc_info=True)
        self._policies.clear()
        if self.client is not None:
            self.client.close()
