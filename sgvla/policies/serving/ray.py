"""The policy server on a Ray cluster: one threaded actor (`RayServer` starts and supervises it, a `ServerHandle`)
whose concurrent `act` calls batch, and the way workers reach it (`RayEndpoint`, `RayClient`): by the actor's name,
so a replacement server is found without telling them. Ray is imported here only when a plan runs on it.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from sgvla.policies.serving.remote import PolicyServerLost, answer, call_server

log = logging.getLogger(__name__)

NAMESPACE = "sgvla"  # the Ray namespace of the actors of every sgvla run
SERVER_PREFIX = "sgvla_policy_server_"  # a run's policy-server actor is named SERVER_PREFIX + the run's id
SERVER_START_TIMEOUT_S = 900.0


def actor_errors() -> tuple[type[BaseException], ...]:
    """Ray's exceptions for an actor that is gone (its process or its node)."""
    import ray.exceptions as rex

    return tuple(getattr(rex, n) for n in ("RayActorError", "ActorDiedError", "ActorUnavailableError")
                 if hasattr(rex, n))


def cause(error: BaseException) -> BaseException:
    """The exception an actor method raised, out of Ray's RayTaskError wrapper."""
    from ray.exceptions import RayTaskError

    if isinstance(error, RayTaskError):
        inner = getattr(error, "cause", None)
        if isinstance(inner, BaseException):
            return inner
        try:
            return error.as_instanceof_cause()
        except Exception:
            return error
    return error


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error)[:2000]}"


def enter(cwd: str | None) -> None:
    """Work in the driver's folder when this machine has it (relative paths of the plan mean the same)."""
    if cwd and os.path.isdir(cwd):
        os.chdir(cwd)


def kill(actor: Any) -> None:
    """End an actor for good (nothing when it is already gone)."""
    if actor is not None:
        import ray

        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # already gone
            pass


class _PolicyServerActor:
    """`build_policy_server(cfg)` in an actor; each caller's (a worker actor's) open sessions are known, so the
    sessions of a lost worker can be closed."""

    def __init__(self, cfg: Any, cwd: str | None = None):
        enter(cwd)
        from sgvla.policies.serving.plan import build_policy_server

        self.server = build_policy_server(cfg)
        self.opened: dict[str, set[tuple[str, str]]] = {}

    def ready(self) -> list[str]:
        return self.server.policies

    def call(self, caller: str, policy: str, session: str, method: str, args: tuple) -> tuple[str, Any]:
        sessions = self.opened.setdefault(caller, set())
        if method == "close":
            sessions.discard((policy, session))
        else:
            sessions.add((policy, session))
        return answer(self.server, policy, session, method, args)

    def forget(self, caller: str) -> None:
        """Close the sessions of a caller that is gone (a lost worker's episode)."""
        self.server.close_sessions(sorted(self.opened.pop(caller, set())))

    def stats(self) -> dict:
        return self.server.stats()


def server_gpus(cfg: Any) -> float:
    """GPUs of the policy-server actor: `executor.gpus_per_server`, or 1 when a served policy runs on cuda."""
    if cfg.executor.gpus_per_server is not None:
        return cfg.executor.gpus_per_server
    from sgvla.policies.serving.plan import served_policies

    served = set(served_policies(cfg))
    cuda = any(str(getattr(p, "device", "") or "").startswith("cuda") for p in cfg.policies
               if p.display_name in served)
    return 1 if cuda else 0


class RayServer:
    """The run's policy-server actor (a `ServerHandle`), named `SERVER_PREFIX` + the run's id in `NAMESPACE`."""

    def __init__(self, cfg: Any, run_id: str, cwd: str | None = None):
        import ray

        self.ray, self.cfg, self.cwd = ray, cfg, cwd
        self.name = SERVER_PREFIX + run_id
        self.actor = None
        self.restarts = 0
        self._cls = ray.remote(_PolicyServerActor)

    def start(self) -> RayServer:
        """Start the actor and wait until its policies are built; RuntimeError with the cause when they fail."""
        options = dict(name=self.name, namespace=NAMESPACE, max_restarts=0, max_concurrency=self.cfg.workers + 4,
                       num_cpus=0, num_gpus=server_gpus(self.cfg), lifetime=None)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.actor = self._cls.options(**options).remote(self.cfg, self.cwd)
                break
            except ValueError:  # the name is still held by the server this one replaces
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        try:
            self.ray.get(self.actor.ready.remote(), timeout=SERVER_START_TIMEOUT_S)
        except Exception as e:
            self.stop()
            raise RuntimeError(f"the policy server could not build its policies: {describe(cause(e))}") from None
        return self

    def alive(self) -> bool:
        if self.actor is None:
            return False
        try:
            self.ray.get(self.actor.ready.remote(), timeout=60)
            return True
        except actor_errors():
            return False
        except self.ray.exceptions.GetTimeoutError:
            return True  # busy, not gone

    def restart(self) -> None:
        self.stop()
        self.restarts += 1
        log.warning("the policy server actor was lost; starting a new one (restart %d)", self.restarts)
        self.start()

    def forget(self, caller: str) -> None:
        """Close the sessions of a worker that is gone (best effort: a server that is gone has none)."""
        if self.actor is not None:
            self.actor.forget.remote(caller)

    def stats(self) -> dict:
        """The policy server's batching stats ({} when it is gone)."""
        if self.actor is None:
            return {}
        try:
            return self.ray.get(self.actor.stats.remote(), timeout=30)
        except Exception:
            return {}

    def stop(self) -> None:
        kill(self.actor)
        self.actor = None


@dataclass(frozen=True)
class RayEndpoint:
    """How a worker actor reaches its run's policy server: by name in `namespace` (picklable: workers get it).
    `caller` names the worker to the server, which closes the sessions of a worker that is lost."""

    name: str
    namespace: str = NAMESPACE
    caller: str = field(default_factory=lambda: uuid.uuid4().hex)

    def client(self) -> RayClient:
        return RayClient(self)


class RayClient:
    """One worker's calls to the policy server actor: ("ok") -> the result, ("gave_up") -> `PolicyGaveUp`, ("error")
    -> `RemotePolicyError`; a server that is gone -> `PolicyServerLost`. After a loss the server is looked up by name
    again at the next call, which reaches its replacement; a `reset` (which opens its session anew) is sent to a
    replacement at once."""

    def __init__(self, endpoint: RayEndpoint):
        self.endpoint = endpoint
        self._actor = None  # the server's handle, looked up by name at the first call and after a loss

    def _server(self):
        if self._actor is None:
            import ray

            try:
                self._actor = ray.get_actor(self.endpoint.name, namespace=self.endpoint.namespace)
            except ValueError as e:  # no live actor of that name
                raise PolicyServerLost(f"the policy server ({self.endpoint.name}) is gone: {e}") from None
        return self._actor

    def _exchange(self, policy: str, session: str, method: str, args: tuple) -> tuple[str, Any]:
        import ray

        return ray.get(self._server().call.remote(self.endpoint.caller, policy, session, method, args))

    def call(self, policy: str, session: str, method: str, *args: Any) -> Any:
        return call_server(lambda: self._exchange(policy, session, method, args), self.close, actor_errors(),
                           self.endpoint.name, method)

    def close(self) -> None:
        self._actor = None
