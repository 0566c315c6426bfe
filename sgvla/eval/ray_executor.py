"""`executor: ray`: a plan's episodes on a Ray cluster (`ray start --head` on one machine, `ray start --address` on the
others; `ray.address` in the plan).

`cfg.workers` simulator-worker actors (each `ray.cpus_per_worker` CPUs) each hold one `Worker` (simulator, graph source,
the policies no server hosts) and run one episode at a time; the driver alone writes the records, from what
`in_ray` yields, exactly as with the local executor. The served policies (`sgvla.eval.serving`) live in one threaded
policy-server actor (`ray.gpus_per_server` GPUs; by default one when a served policy runs on cuda), whose concurrent
`act` calls batch; workers reach it by its name (`RayEndpoint`), so a replacement server is found without telling them.

Failures are infrastructure failures of the episodes then running, never results: an actor lost mid-episode (its
process or node gone) fails its episode as `WorkerLost` (kind "worker_lost") and a new actor replaces it; a lost
policy server fails the episodes waiting on it as `PolicyServerLost` and a new server replaces it before more episodes
are submitted. A replacement gets work once it is up, so one the cluster cannot place (its node gone) costs nothing
but its share of the work while another worker runs; when no worker of the run is up and one has waited
`ray.placement_timeout_s` to be placed (no node has its CPUs free), the run stops with one line saying what could not be
placed and what to do (records already written stay). Ray is imported here only, when a plan runs on it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sgvla.core.episode import EpisodeKey, InfrastructureFailure
from sgvla.eval.worker import Worker, WorkerSetupError
from sgvla.policies.remote import PolicyServerLost, answer, call_server

log = logging.getLogger(__name__)
__all__ = ["in_ray", "RayEndpoint", "RayClient", "WorkerLost", "NAMESPACE", "SERVER_PREFIX"]

NAMESPACE = "sgvla"  # the Ray namespace of the actors of every sgvla run
SERVER_PREFIX = "sgvla_policy_server_"  # a run's policy-server actor is named SERVER_PREFIX + the run's id
# Settings of the driver's environment that the actors get too (how to render, whether to reach the hub).
FORWARDED_ENV = ("MUJOCO_GL", "PYOPENGL_PLATFORM", "MUJOCO_EGL_DEVICE_ID", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
SERVER_START_TIMEOUT_S = 900.0


class WorkerLost(InfrastructureFailure):
    """The Ray actor running the episode was lost (its process or its node died)."""

    kind = "worker_lost"


def _actor_errors() -> tuple[type[BaseException], ...]:
    import ray.exceptions as rex

    return tuple(getattr(rex, n) for n in ("RayActorError", "ActorDiedError", "ActorUnavailableError")
                 if hasattr(rex, n))


def _cause(error: BaseException) -> BaseException:
    """The exception an actor method raised, out of Ray's RayTaskError wrapper."""
    from ray.exceptions import RayTaskError

    if isinstance(error, RayTaskError):
        cause = getattr(error, "cause", None)
        if isinstance(cause, BaseException):
            return cause
        try:
            return error.as_instanceof_cause()
        except Exception:
            return error
    return error


# -- the policy server and the way to it ---------------------------------------------------------------------------


class _PolicyServerActor:
    """`build_policy_server(cfg)` in an actor; each caller's (a worker actor's) open sessions are known, so the
    sessions of a lost worker can be closed."""

    def __init__(self, cfg: Any, cwd: str | None = None):
        _enter(cwd)
        from sgvla.eval.serving import build_policy_server

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
        return call_server(lambda: self._exchange(policy, session, method, args), self.close, _actor_errors(),
                           self.endpoint.name, method)

    def close(self) -> None:
        self._actor = None


# -- the simulator workers ------------------------------------------------------------------------------------------


def _enter(cwd: str | None) -> None:
    """Work in the driver's folder when this machine has it (relative paths of the plan mean the same)."""
    if cwd and os.path.isdir(cwd):
        os.chdir(cwd)


class _WorkerActor:
    """One `Worker` (sgvla.eval.worker) in an actor, built by `ready` (which says why it could not be): the actor's
    creation does nothing else, so `placed` answers as soon as the cluster has placed the actor, and a placement that
    does not come is told from a simulator that takes long to build."""

    def __init__(self, cfg: Any, endpoint: RayEndpoint | None, cwd: str | None = None):
        _enter(cwd)
        self.args = (cfg, endpoint)
        self.worker, self.error = None, ""

    def placed(self) -> bool:
        return True

    def ready(self) -> str:
        """'' when the worker is set up, else why not."""
        try:
            self.worker = Worker(*self.args)
        except Exception as e:
            self.error = f"{type(e).__name__}: {e}"
        return self.error

    def run(self, key: EpisodeKey) -> dict:
        return self.worker.run(key)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close_runner()


# -- the executor ---------------------------------------------------------------------------------------------------


def server_gpus(cfg: Any) -> float:
    """GPUs of the policy-server actor: `ray.gpus_per_server`, or 1 when a served policy runs on cuda."""
    if cfg.ray.gpus_per_server is not None:
        return cfg.ray.gpus_per_server
    from sgvla.eval.serving import served_policies

    served = set(served_policies(cfg))
    cuda = any(str(getattr(p, "device", "") or "").startswith("cuda") for p in cfg.policies
               if p.display_name in served)
    return 1 if cuda else 0


PROBE_TIMEOUT_S = 5.0


def unreachable(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """Why nothing listens at a ``host:port`` (or ``ray://host:port``) cluster address now; "" when something does,
    or for ``auto`` (Ray finds this machine's cluster and says at once when there is none). Ray's driver retries an
    address with nothing behind it forever (a warning every few seconds), so a run would wait for a cluster that
    was never started."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or not host or not port.isdigit():
        return ""
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return ""
    except OSError as e:
        return f"nothing answers at {host}:{port} ({e.strerror or type(e).__name__})"


def _init(cfg: Any) -> bool:
    """Connect to the cluster; False when this process was already connected (its caller's, left as it is)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        return False
    why = unreachable(cfg.ray.address)
    if why:
        raise ConnectionError(why)
    ray.init(address=cfg.ray.address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING,
             configure_logging=False, runtime_env=_runtime_env())
    return True


def _runtime_env() -> dict | None:
    env = {k: os.environ[k] for k in FORWARDED_ENV if os.environ.get(k)}
    return {"env_vars": env} if env else None


class _Cluster:
    """The run's actors: the policy server (when the plan serves policies) and the simulator workers."""

    def __init__(self, cfg: Any):
        import ray

        from sgvla.eval.serving import served_policies

        self.ray, self.cfg = ray, cfg
        self.run_id = uuid.uuid4().hex[:12]
        self.cwd = os.getcwd()
        self.serves = bool(served_policies(cfg))
        self.server = None
        self.server_name = SERVER_PREFIX + self.run_id
        self.server_restarts = 0
        self.worker_cls = ray.remote(_WorkerActor)
        self.server_cls = ray.remote(_PolicyServerActor)
        self.actors: dict[str, Any] = {}  # caller id -> worker actor
        self.starting: dict[Any, str] = {}  # ready() ref -> caller id, for workers not yet up
        self.placing: dict[Any, tuple[str, float]] = {}  # placed() ref -> (caller id, when asked), for unplaced ones
        self.warned_unplaced = False
        self.idle: deque[str] = deque()  # caller ids of workers that are up and have no episode

    # the policy server
    def start_server(self) -> None:
        if not self.serves:
            return
        options = dict(name=self.server_name, namespace=NAMESPACE, max_restarts=0, max_concurrency=self.cfg.workers + 4,
                       num_cpus=0, num_gpus=server_gpus(self.cfg), lifetime=None)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.server = self.server_cls.options(**options).remote(self.cfg, self.cwd)
                break
            except ValueError:  # the name is still held by the server this one replaces
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        try:
            self.ray.get(self.server.ready.remote(), timeout=SERVER_START_TIMEOUT_S)
        except Exception as e:
            self.kill(self.server)
            self.server = None
            raise _SetupFailed(f"the policy server could not build its policies: {_describe(_cause(e))}") from None

    def server_alive(self) -> bool:
        if self.server is None:
            return False
        try:
            self.ray.get(self.server.ready.remote(), timeout=60)
            return True
        except _actor_errors():
            return False
        except self.ray.exceptions.GetTimeoutError:
            return True  # busy, not gone

    def restart_server(self) -> None:
        self.kill(self.server)
        self.server = None
        self.server_restarts += 1
        log.warning("the policy server actor was lost; starting a new one (restart %d)", self.server_restarts)
        self.start_server()

    def forget(self, caller: str) -> None:
        if self.server is not None:
            self.server.forget.remote(caller)  # best effort: a server that is gone has no sessions to close

    # the workers
    def add_worker(self) -> None:
        endpoint = RayEndpoint(self.server_name) if self.serves else None
        caller = endpoint.caller if endpoint else uuid.uuid4().hex
        actor = self.worker_cls.options(max_restarts=0, max_task_retries=0, num_cpus=self.cfg.ray.cpus_per_worker,
                                        name=f"sgvla_worker_{self.run_id}_{caller[:8]}", namespace=NAMESPACE
                                        ).remote(self.cfg, endpoint, self.cwd)
        self.actors[caller] = actor
        self.placing[actor.placed.remote()] = (caller, time.monotonic())
        self.starting[actor.ready.remote()] = caller

    def drop_worker(self, caller: str) -> None:
        self.kill(self.actors.pop(caller, None))
        self.placing = {ref: entry for ref, entry in self.placing.items() if entry[0] != caller}
        self.forget(caller)
        if caller in self.idle:
            self.idle.remove(caller)

    def placement_deadline(self) -> float | None:
        """Seconds until the longest-waiting unplaced worker has waited `ray.placement_timeout_s` (0: it has), None
        when every worker is placed."""
        if not self.placing:
            return None
        oldest = min(since for _, since in self.placing.values())
        return max(0.0, oldest + self.cfg.ray.placement_timeout_s - time.monotonic())

    def unplaced(self) -> str:
        """What could not be placed, and what the cluster has, in words."""
        try:
            total, free = self.ray.cluster_resources(), self.ray.available_resources()
            nodes = sum(bool(n.get("Alive")) for n in self.ray.nodes())
            has = (f"the cluster has {nodes} live node(s), {total.get('CPU', 0):g} CPUs in all, "
                   f"{free.get('CPU', 0):g} free")
        except Exception as e:  # the cluster itself is unreachable now
            has = f"the cluster does not answer ({type(e).__name__})"
        return (f"the Ray cluster at ray.address={self.cfg.ray.address} placed no simulator worker within "
                f"ray.placement_timeout_s={self.cfg.ray.placement_timeout_s:g} s ({len(self.placing)} waiting, "
                f"ray.cpus_per_worker={self.cfg.ray.cpus_per_worker:g} CPUs each on one node; {has}); add a node or "
                "free its CPUs, lower ray.cpus_per_worker, or raise ray.placement_timeout_s, then rerun the same "
                "command (it resumes)")

    def kill(self, actor) -> None:
        if actor is not None:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # already gone
                pass

    def server_stats(self) -> dict:
        """The policy server's batching stats ({} without a server, or one that is gone)."""
        if self.server is None:
            return {}
        try:
            return self.ray.get(self.server.stats.remote(), timeout=30)
        except Exception:
            return {}

    def close(self) -> None:
        for caller in list(self.actors):
            self.kill(self.actors.pop(caller))
        self.kill(self.server)
        self.server = None


class _SetupFailed(RuntimeError):
    pass


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error)[:2000]}"


def in_ray(cfg: Any, todo: list[EpisodeKey], stop: Callable[[], bool], server=None,
           stats: dict | None = None) -> Iterator:
    """The plan's episodes on the Ray cluster at `cfg.ray.address` (see the module docstring), yielded as
    (episode, record or exception) as they end. `server` is unused: the policy server is an actor of the run, whose
    batching stats go into `stats` at the end."""
    if not todo:
        return
    try:
        owns_ray = _init(cfg)
    except (ConnectionError, RuntimeError, ValueError) as e:  # no cluster there: no episode can run
        yield todo[0], WorkerSetupError(
            f"cannot reach a Ray cluster at ray.address={cfg.ray.address} ({type(e).__name__}: {str(e)[:300]}); "
            "start one (`ray start --head --port=6379` here, `ray start --address=HEAD:6379` on the other machines) "
            "and pass its address (ray.address=HEAD:6379), or run locally (executor=local)")
        return
    cluster = None
    try:
        cluster = _Cluster(cfg)
        yield from _schedule(cluster, cfg, deque(todo), stop, WorkerSetupError)
    finally:
        if cluster is not None:
            if stats is not None:
                stats.update(cluster.server_stats())
            cluster.close()
        if owns_ray:
            import ray

            ray.shutdown()


def _schedule(cluster: _Cluster, cfg: Any, queue: deque, stop: Callable[[], bool], setup_error: type) -> Iterator:
    ray = cluster.ray
    lost_errors = _actor_errors()
    try:
        cluster.start_server()
    except _SetupFailed as e:
        yield queue[0], setup_error(str(e))
        return
    for _ in range(cfg.workers):
        cluster.add_worker()
    running: dict[Any, tuple[EpisodeKey, str]] = {}  # run() ref -> (episode, caller id)
    check_server = False
    while queue or running:
        if check_server and cluster.serves:
            check_server = False
            if not cluster.server_alive():
                try:
                    cluster.restart_server()
                except _SetupFailed as e:
                    for episode in queue:
                        yield episode, PolicyServerLost(str(e))
                    queue.clear()
        while queue and cluster.idle and not stop():
            caller = cluster.idle.popleft()
            episode = queue.popleft()
            running[cluster.actors[caller].run.remote(episode)] = (episode, caller)
        if not running and (stop() or not queue):
            break
        if not running and not cluster.starting:  # every worker lost and none replaced: cannot happen, but never hang
            cluster.add_worker()
        deadline = cluster.placement_deadline()
        if deadline == 0:
            if not running and not cluster.idle and len(cluster.placing) == len(cluster.starting):  # none is up
                yield queue[0], setup_error(cluster.unplaced())
                return
            if not cluster.warned_unplaced:
                cluster.warned_unplaced = True
                log.warning("%s; the run goes on with the workers that are up", cluster.unplaced())
            deadline = None
        done, _ = ray.wait(list(running) + list(cluster.starting) + list(cluster.placing), num_returns=1,
                           timeout=deadline)
        if not done:
            continue
        ref = done[0]
        if ref in cluster.placing:
            del cluster.placing[ref]  # placed (or lost: its ready() says which)
            continue
        if ref in cluster.starting:
            caller = cluster.starting.pop(ref)
            cluster.placing = {r: entry for r, entry in cluster.placing.items() if entry[0] != caller}
            try:
                error = ray.get(ref)
            except lost_errors as e:  # lost before it was up: no episode went with it
                log.warning("a worker actor was lost while starting (%s); starting another", _describe(e)[:300])
                cluster.drop_worker(caller)
                cluster.add_worker()
                continue
            if error:
                if queue:
                    yield queue[0], setup_error(error)
                return
            cluster.idle.append(caller)
            continue
        episode, caller = running.pop(ref)
        try:
            outcome: Any = ray.get(ref)
        except Exception as e:
            if isinstance(e, ray.exceptions.RayTaskError) or not isinstance(e, lost_errors):
                outcome = _cause(e)  # what Worker.run raised, out of Ray's wrapper
            else:
                outcome = WorkerLost(f"the Ray actor running it was lost ({_describe(e)[:500]})")
                log.warning("episode %s: its worker actor was lost; starting another", tuple(episode))
                cluster.drop_worker(caller)
                cluster.add_worker()
        if caller in cluster.actors:
            cluster.idle.append(caller)
        if isinstance(outcome, PolicyServerLost):
            check_server = True
        yield episode, outcome
