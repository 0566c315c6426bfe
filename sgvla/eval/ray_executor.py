"""`executor: ray`: a plan's episodes on a Ray cluster (`ray start --head` on one machine, `ray start --address` on the
others; `executor.address` in the plan), as a `WorkerPool` (`RayPool`) of the one scheduling loop (sgvla.eval.schedule).

`cfg.workers` simulator-worker actors (each `executor.cpus_per_worker` CPUs) each hold one `Worker` (simulator, graph
source, the policies no server hosts) and run one episode at a time; the driver alone writes the records, exactly as
with the local executor. The served policies live in one threaded policy-server actor (`RayServer`,
sgvla.policies.serving.ray: `executor.gpus_per_server` GPUs; by default one when a served policy runs on cuda), whose
concurrent `act` calls batch; workers reach it by its name, so a replacement server is found without telling them.

Failures are infrastructure failures of the episodes then running, never results: an actor lost mid-episode (its
process or node gone) fails its episode as `WorkerLost` (kind "worker_lost") and a new actor replaces it; a lost
policy server fails the episodes waiting on it as `PolicyServerLost` and a new server replaces it before more episodes
are submitted. A replacement gets work once it is up, so one the cluster cannot place (its node gone) costs nothing
but its share of the work while another worker runs; when no worker of the run is up and one has waited
`executor.placement_timeout_s` to be placed (no node has its CPUs free), the run stops with one line saying what could
not be placed and what to do (records already written stay). Ray is imported here only, when a plan runs on it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections import deque
from typing import Any

from sgvla.core.episode import EpisodeKey
from sgvla.eval.pool import Outcome, WorkerLost
from sgvla.eval.worker import Worker, WorkerSetupError
from sgvla.policies.serving.ray import NAMESPACE, RayEndpoint, RayServer, actor_errors, cause, describe, enter, kill

log = logging.getLogger(__name__)
__all__ = ["RayPool", "unreachable"]

# Settings of the driver's environment that the actors get too (how to render, whether to reach the hub).
FORWARDED_ENV = ("MUJOCO_GL", "PYOPENGL_PLATFORM", "MUJOCO_EGL_DEVICE_ID", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
PROBE_TIMEOUT_S = 5.0


class _WorkerActor:
    """One `Worker` (sgvla.eval.worker) in an actor, built by `ready` (which says why it could not be): the actor's
    creation does nothing else, so `placed` answers as soon as the cluster has placed the actor, and a placement that
    does not come is told from a simulator that takes long to build."""

    def __init__(self, cfg: Any, endpoint: RayEndpoint | None, cwd: str | None = None):
        enter(cwd)
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
    why = unreachable(cfg.executor.address)
    if why:
        raise ConnectionError(why)
    ray.init(address=cfg.executor.address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING,
             configure_logging=False, runtime_env=_runtime_env())
    return True


def _runtime_env() -> dict | None:
    env = {k: os.environ[k] for k in FORWARDED_ENV if os.environ.get(k)}
    return {"env_vars": env} if env else None


class RayPool:
    """The run's worker actors on the cluster at `executor.address` (see the module docstring), and its policy-server
    actor (`server`, when the plan serves policies)."""

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.server: RayServer | None = None
        self.ray = None
        self.owns_ray = False
        self.actors: dict[str, Any] = {}  # caller id -> worker actor
        self.starting: dict[Any, str] = {}  # ready() ref -> caller id, for workers not yet up
        self.placing: dict[Any, tuple[str, float]] = {}  # placed() ref -> (caller id, when asked), for unplaced ones
        self.running: dict[Any, tuple[EpisodeKey, str]] = {}  # run() ref -> (episode, caller id)
        self.idle: deque[str] = deque()  # caller ids of workers that are up and have no episode
        self.warned_unplaced = False

    def start(self) -> None:
        from sgvla.policies.serving.plan import served_policies

        options = self.cfg.executor
        try:
            self.owns_ray = _init(self.cfg)
        except (ConnectionError, RuntimeError, ValueError) as e:  # no cluster there: no episode can run
            raise WorkerSetupError(
                f"cannot reach a Ray cluster at executor.address={options.address} ({type(e).__name__}: "
                f"{str(e)[:300]}); start one (`ray start --head --port=6379` here, `ray start --address=HEAD:6379` on "
                "the other machines) and pass its address (executor.address=HEAD:6379), or run locally "
                "(executor=local)") from None
        import ray

        self.ray = ray
        self.run_id = uuid.uuid4().hex[:12]
        self.cwd = os.getcwd()
        self.worker_cls = ray.remote(_WorkerActor)
        if served_policies(self.cfg):
            try:
                self.server = RayServer(self.cfg, self.run_id, self.cwd).start()
            except RuntimeError as e:
                raise WorkerSetupError(str(e)) from None
        for _ in range(self.cfg.workers):
            self._add_worker()

    def _add_worker(self) -> None:
        endpoint = RayEndpoint(self.server.name) if self.server is not None else None
        caller = endpoint.caller if endpoint else uuid.uuid4().hex
        actor = self.worker_cls.options(max_restarts=0, max_task_retries=0, num_cpus=self.cfg.executor.cpus_per_worker,
                                        name=f"sgvla_worker_{self.run_id}_{caller[:8]}", namespace=NAMESPACE
                                        ).remote(self.cfg, endpoint, self.cwd)
        self.actors[caller] = actor
        self.placing[actor.placed.remote()] = (caller, time.monotonic())
        self.starting[actor.ready.remote()] = caller

    def _drop_worker(self, caller: str) -> None:
        kill(self.actors.pop(caller, None))
        self.placing = {ref: entry for ref, entry in self.placing.items() if entry[0] != caller}
        if self.server is not None:
            self.server.forget(caller)
        if caller in self.idle:
            self.idle.remove(caller)

    def _placement_deadline(self) -> float | None:
        """Seconds until the longest-waiting unplaced worker has waited `executor.placement_timeout_s` (0: it has),
        None when every worker is placed."""
        if not self.placing:
            return None
        oldest = min(since for _, since in self.placing.values())
        return max(0.0, oldest + self.cfg.executor.placement_timeout_s - time.monotonic())

    def _unplaced(self) -> str:
        """What could not be placed, and what the cluster has, in words."""
        options = self.cfg.executor
        try:
            total, free = self.ray.cluster_resources(), self.ray.available_resources()
            nodes = sum(bool(n.get("Alive")) for n in self.ray.nodes())
            has = (f"the cluster has {nodes} live node(s), {total.get('CPU', 0):g} CPUs in all, "
                   f"{free.get('CPU', 0):g} free")
        except Exception as e:  # the cluster itself is unreachable now
            has = f"the cluster does not answer ({type(e).__name__})"
        return (f"the Ray cluster at executor.address={options.address} placed no simulator worker within "
                f"executor.placement_timeout_s={options.placement_timeout_s:g} s ({len(self.placing)} waiting, "
                f"executor.cpus_per_worker={options.cpus_per_worker:g} CPUs each on one node; {has}); add a node or "
                "free its CPUs, lower executor.cpus_per_worker, or raise executor.placement_timeout_s, then rerun the "
                "same command (it resumes)")

    def free(self) -> int:
        return len(self.idle)

    def submit(self, episode: EpisodeKey) -> bool:
        caller = self.idle.popleft()
        self.running[self.actors[caller].run.remote(episode)] = (episode, caller)
        return True

    def wait(self) -> list[Outcome]:
        if not self.running and not self.starting:  # every worker lost and none replaced: cannot happen, never hang
            self._add_worker()
        deadline = self._placement_deadline()
        if deadline == 0:
            if not self.running and not self.idle and len(self.placing) == len(self.starting):  # none is up
                raise WorkerSetupError(self._unplaced())
            if not self.warned_unplaced:
                self.warned_unplaced = True
                log.warning("%s; the run goes on with the workers that are up", self._unplaced())
            deadline = None
        done, _ = self.ray.wait(list(self.running) + list(self.starting) + list(self.placing), num_returns=1,
                                timeout=deadline)
        if not done:
            return []
        ref = done[0]
        if ref in self.placing:
            del self.placing[ref]  # placed (or lost: its ready() says which)
            return []
        if ref in self.starting:
            self._started(ref)
            return []
        return [self._ended(ref)]

    def _started(self, ref: Any) -> None:
        caller = self.starting.pop(ref)
        self.placing = {r: entry for r, entry in self.placing.items() if entry[0] != caller}
        try:
            error = self.ray.get(ref)
        except actor_errors() as e:  # lost before it was up: no episode went with it
            log.warning("a worker actor was lost while starting (%s); starting another", describe(e)[:300])
            self._drop_worker(caller)
            self._add_worker()
            return
        if error:
            raise WorkerSetupError(error)
        self.idle.append(caller)

    def _ended(self, ref: Any) -> Outcome:
        episode, caller = self.running.pop(ref)
        try:
            outcome: Any = self.ray.get(ref)
        except Exception as e:
            if isinstance(e, self.ray.exceptions.RayTaskError) or not isinstance(e, actor_errors()):
                outcome = cause(e)  # what Worker.run raised, out of Ray's wrapper
            else:
                outcome = WorkerLost(f"the Ray actor running it was lost ({describe(e)[:500]})")
                log.warning("episode %s: its worker actor was lost; starting another", tuple(episode))
                self._drop_worker(caller)
                self._add_worker()
        if caller in self.actors:
            self.idle.append(caller)
        return episode, outcome

    def close(self) -> None:
        for caller in list(self.actors):
            kill(self.actors.pop(caller))
        if self.server is not None:
            self.server.stop()
        if self.owns_ray:
            self.ray.shutdown()
