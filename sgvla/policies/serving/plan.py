"""Which of a plan's policies one policy server hosts, and the server a plan builds (`PolicyServer`).

Every executor uses these two functions: the local one runs the server in a process of its own (`LocalServer`), the
Ray one in an actor (`RayServer`); workers reach it through a `RemotePolicy`. The plan (`sgvla.eval.config.EvalConfig`)
is read, not imported: serving stands below the evaluation that plans it.
"""

from __future__ import annotations

from typing import Any

from sgvla.policies.serving.server import PolicyServer
from sgvla.scene_graph import load_ontology


def served_policies(cfg: Any) -> list[str]:
    """Names of the plan's policies the server hosts (`policy_server.serve`); the rest run in each worker. `auto`
    hosts the learned ones unless every episode runs in this one process (the executor says)."""
    serve = cfg.policy_server.serve
    if serve == "none":
        return []
    if serve == "auto" and cfg.executor.in_one_process(cfg.workers):
        return []
    return [p.display_name for p in cfg.policies if serve == "all" or p.learned]


def build_policy_server(cfg: Any) -> PolicyServer:
    """The plan's served policies, each built once, with the suite's controller factory for scripted ones."""
    ontology = load_ontology(cfg.ontology)
    configs = {p.display_name: p for p in cfg.policies}

    def builder(name: str):
        config = configs[name]
        env_config = cfg.suite.lerobot_env_config() if config.learned else None
        return lambda: config.make_batch(ontology=ontology, env_config=env_config)

    return PolicyServer({name: builder(name) for name in served_policies(cfg)},
                        max_batch=cfg.policy_server.max_batch, max_wait_ms=cfg.policy_server.max_wait_ms,
                        controller_factory=cfg.suite.controller_factory())
