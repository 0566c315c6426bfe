"""The simulator workers of a run, as the one scheduling loop (`sgvla.eval.schedule`) sees them: a `WorkerPool`.

Three pools, one per way episodes run: `InlinePool` (one `Worker` in this process), `ProcessPool` (`workers`
processes of this machine) and `sgvla.eval.ray_executor.RayPool` (actors of a Ray cluster); the plan's executor
(`sgvla.eval.executor`) picks one. Each starts the plan's policy server when it serves policies
(`sgvla.policies.serving`), and holds it as its `server` (a `ServerHandle`) for the loop to supervise.

A worker lost mid-episode (its process killed, its node gone) costs that episode only: it is a `WorkerLost`
infrastructure failure (rerun by the next run of the plan), and a new worker replaces the lost one while the others
go on. Worker processes die with this one however it ends (SIGKILL included: `sgvla.eval.worker.end_with_parent`).
"""

from __future__ import annotations

import logging
import os
from functools import partial
from multiprocessing import get_context
from multiprocessing.connection import wait as wait_for
from typing import TYPE_CHECKING, Any, Protocol

from sgvla.core.episode import EpisodeKey, InfrastructureFailure
from sgvla.eval.worker import RemoteTraceback, Worker, WorkerSetupError, serve_episodes
from sgvla.policies.serving.handle import ServerHandle
from sgvla.policies.serving.local import LocalServer
from sgvla.policies.serving.plan import build_policy_server, served_policies

if TYPE_CHECKING:
    from sgvla.eval.config import EvalConfig

log = logging.getLogger(__name__)

Outcome = tuple[EpisodeKey, Any]  # an episode and its record (a dict) or the exception it ended with


class WorkerLost(InfrastructureFailure):
    """The worker running the episode was lost (its process killed, its Ray actor or node gone)."""

    kind = "worker_lost"


class WorkerPool(Protocol):
    """A run's simulator workers, each running one episode at a time."""

    server: ServerHandle | None  # the run's policy server, once started (None when it serves nothing)

    def start(self) -> None:
        """Start the policy server and the workers (those that take long to start come up during `wait`);
        `WorkerSetupError` when no episode can run."""

    def free(self) -> int:
        """Workers that are up and have no episode."""

    def submit(self, episode: EpisodeKey) -> bool:
        """Give a free worker `episode`; False when that worker turned out to be gone (a new one replaces it; no
        episode went with it: give it again later)."""

    def wait(self) -> list[Outcome]:
        """Block until an episode ends or a worker comes up; the episodes that ended. `WorkerSetupError` when no
        episode can run (the workers cannot be set up, or placed)."""

    def close(self) -> None:
        """End the workers (those still running an episode at once) and the policy server."""


def start_local_server(cfg: EvalConfig) -> LocalServer | None:
    """The plan's policy server in a process of this machine, when it serves policies."""
    if not served_policies(cfg):
        return None
    try:
        return LocalServer(partial(build_policy_server, cfg)).start()
    except RuntimeError as e:
        raise WorkerSetupError(str(e)) from None


class InlinePool:
    """One `Worker` in this process, which runs each episode in `wait`."""

    def __init__(self, cfg: EvalConfig):
        self.cfg = cfg
        self.server: LocalServer | None = None
        self.worker: Worker | None = None
        self._next: EpisodeKey | None = None

    def start(self) -> None:
        self.server = start_local_server(self.cfg)
        try:
            self.worker = Worker(self.cfg, self.server.endpoint if self.server else None)
        except Exception as e:
            raise WorkerSetupError(f"{type(e).__name__}: {e}") from e

    def free(self) -> int:
        return int(self.worker is not None and self._next is None)

    def submit(self, episode: EpisodeKey) -> bool:
        self._next = episode
        return True

    def wait(self) -> list[Outcome]:
        episode, self._next = self._next, None
        try:
            outcome: Any = self.worker.run(episode)
        except Exception as e:
            outcome = e
        return [(episode, outcome)]

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close_runner()
            self.worker = None
        if self.server is not None:
            self.server.stop()


class _WorkerProcess:
    """One worker process (`sgvla.eval.worker.serve_episodes`) and the pipe its episodes and records go through."""

    def __init__(self, cfg: EvalConfig, endpoint: Any):
        ctx = get_context("spawn")
        self.conn, theirs = ctx.Pipe()
        self.process = ctx.Process(target=serve_episodes, args=(cfg, os.getpid(), endpoint, theirs),
                                   name="sgvla-worker")
        self.process.start()
        theirs.close()
        self.up = False  # set up, taking episodes
        self.episode: EpisodeKey | None = None  # the one it runs

    def message(self) -> tuple[str, Any] | None:
        """What it sent, None when it is gone, ("", None) when neither (yet)."""
        try:
            if self.conn.poll():
                return self.conn.recv()
        except (EOFError, OSError):
            return None
        return ("", None) if self.process.is_alive() else None

    def end(self, kill: bool) -> None:
        try:
            if not kill:
                self.conn.send(None)  # done: it closes its simulator and ends
        except OSError:
            pass
        self.process.join(0 if kill else 30)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.conn.close()


class ProcessPool:
    """`cfg.workers` worker processes, each running one episode at a time and keeping its simulator between them. A
    worker process lost mid-episode fails that episode as `WorkerLost`; a new process replaces it."""

    START_DEATHS = 3  # worker processes that may die while starting, one after another, before the run stops

    def __init__(self, cfg: EvalConfig):
        self.cfg = cfg
        self.server: LocalServer | None = None
        self.workers: list[_WorkerProcess] = []
        self._start_deaths = 0

    def _add(self) -> None:
        self.workers.append(_WorkerProcess(self.cfg, self.server.endpoint if self.server else None))

    def start(self) -> None:
        self.server = start_local_server(self.cfg)
        for _ in range(self.cfg.workers):
            self._add()

    def free(self) -> int:
        return sum(w.up and w.episode is None for w in self.workers)

    def submit(self, episode: EpisodeKey) -> bool:
        worker = next(w for w in self.workers if w.up and w.episode is None)
        try:
            worker.conn.send(episode)
        except OSError:  # it died while idle: no episode was lost with it
            self._replace(worker)
            return False
        worker.episode = episode
        return True

    def wait(self) -> list[Outcome]:
        watched = [w for w in self.workers if w.episode is not None or not w.up]
        ready = set(wait_for([w.conn for w in watched] + [w.process.sentinel for w in watched]))
        ended: list[Outcome] = []
        for worker in watched:
            if worker.conn not in ready and worker.process.sentinel not in ready:
                continue
            message = worker.message()
            if message is None:
                ended += self._lost(worker)
                continue
            kind, payload = message
            if kind == "up":
                if payload:  # it could not set itself up: nor can the others
                    raise WorkerSetupError(payload)
                worker.up, self._start_deaths = True, 0
            elif kind in ("done", "failed"):
                ended.append((worker.episode, payload if kind == "done" else _raised(*payload)))
                worker.episode = None
        return ended

    def _lost(self, worker: _WorkerProcess) -> list[Outcome]:
        worker.process.join(5)
        code = worker.process.exitcode
        episode = worker.episode
        self._replace(worker)
        if episode is not None:
            log.warning("episode %s: its worker process died (exit code %s); a new one replaces it", tuple(episode),
                        code)
            return [(episode, WorkerLost(f"the worker process running it died (exit code {code})"))]
        if not worker.up:
            self._start_deaths += 1
            if self._start_deaths >= self.START_DEATHS:
                raise WorkerSetupError(f"{self._start_deaths} worker processes died while starting, the last with "
                                       f"exit code {code}")
        return []

    def _replace(self, worker: _WorkerProcess) -> None:
        worker.end(kill=True)
        self.workers.remove(worker)
        self._add()

    def close(self) -> None:
        for worker in self.workers:  # those running an episode (an interrupted run) end now, the rest when done
            worker.end(kill=worker.episode is not None or not worker.up)
        self.workers.clear()
        if self.server is not None:
            self.server.stop()


def _raised(error: BaseException, trace: str) -> BaseException:
    """The exception a worker process sent, with its traceback there as its cause (as a process pool gives it)."""
    error.__cause__ = RemoteTraceback(trace)
    return error
