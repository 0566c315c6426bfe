"""Which of a plan's policies one policy server hosts, and the server a plan builds (sgvla.policies.server).

Every executor uses these two functions: the local one runs the server in a process of its own
(`sgvla.policies.remote.LocalServer`), the Ray one in an actor; workers reach it through a `RemotePolicy`.
"""

from __future__ import annotations

from sgvla.eval.config import EvalConfig
from sgvla.policies.server import PolicyServer
from sgvla.scene_graph import load_ontology


def served_policies(cfg: EvalConfig) -> list[str]:
    """Names of the plan's policies the server hosts (`policy_server.serve`); the rest run in each worker."""
    serve = cfg.policy_server.serve
    if serve == "none":
        return []
    if serve == "auto" and cfg.executor == "local" and cfg.workers == 1:
        return []
    return [p.display_name for p in cfg.policies if serve == "all" or p.learned]


def build_policy_server(cfg: EvalConfig) -> PolicyServer:
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
