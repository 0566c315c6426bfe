"""One simulator worker of an evaluation: its simulator (one task's at a time), graph source and policies, reused
across the episodes it runs, in process, in a worker process (`serve_episodes`) or in a Ray actor.

Worker processes die with the process that started them however it ends (SIGKILL included): each asks the kernel
for SIGKILL when its parent dies (PR_SET_PDEATHSIG) and checks that the parent is still the one that started it.

A worker imports what stepping its suite needs and nothing of the policies it does not run itself: with served or
scripted policies no torch, LeRobot policy code or transformers (tests/eval/test_lean_workers.py holds the boundary,
for the SO101 twin and LIBERO). Each
episode gives its simulator builds' temporaries back to the system (`release_free_memory`).

An episode's sessions on the policy server close as soon as its record is taken: the server's batches wait for the
steps of every open session, and a worker between episodes (rebuilding its simulator for the next task) has no step
to give.
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import signal
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

# Headless rendering unless the environment says otherwise. MuJoCo picks its GL backend when it is first
# imported (below, through the policies), so this must come first; later it would be too late.
os.environ.setdefault("MUJOCO_GL", "egl")

from sgvla.core.context import ContextMode  # noqa: E402
from sgvla.core.episode import Episode, EpisodeKey, InfrastructureFailure  # noqa: E402
from sgvla.core.processes import die_with_parent  # noqa: E402
from sgvla.eval.loop import run_episode  # noqa: E402
from sgvla.policies.serving.plan import served_policies  # noqa: E402
from sgvla.policies.session import PolicySession  # noqa: E402
from sgvla.scene_graph import load_ontology  # noqa: E402
from sgvla.sim.heap import release_free_memory  # noqa: E402

if TYPE_CHECKING:
    from sgvla.eval.config import EvalConfig

log = logging.getLogger(__name__)


class WorkerSetupError(RuntimeError):
    """A worker could not build its simulator, policies or VLM: no episode can run."""


class Worker:
    """The simulator (one task's at a time), graph source and policies of one process, reused across the
    episodes it runs. Everything comes from the plan's registered choices: the suite builds the backend, the
    graph source its source, each policy config its policy; the policies a policy server hosts are reached
    through `endpoint` (whose `client()` connects to it)."""

    def __init__(self, cfg: EvalConfig, endpoint=None):
        self.cfg = cfg
        self.ontology = load_ontology(cfg.ontology)
        self.configs = {p.display_name: p for p in cfg.policies}
        self.backend = self.source = None
        self._task: int | None = None
        self.policies = (PolicySession(set(served_policies(cfg)), endpoint.client()) if endpoint is not None
                         else PolicySession())

    def open(self, task_id: int):
        """The backend of `task_id` (built when the task changes) and its graph source."""
        if self.backend is None or self._task != task_id:
            self.close_backend()
            cfg = self.cfg
            self.backend = cfg.suite.make_backend(task_id, cfg.perturbations, cfg.needs_images, cfg.max_steps)
            self.source = cfg.graph_source.make(self.backend, self.ontology, cfg.suite.upright)
            self._task = task_id
        return self.backend

    def close_backend(self) -> None:
        backend, source, self.backend, self.source = self.backend, self.source, None, None
        for part in (source, backend):
            if part is not None:
                try:
                    part.close()
                except Exception:  # a crashed simulator may not close cleanly; a new one replaces it
                    log.warning("closing the simulator of task %s failed", self._task, exc_info=True)

    def policy(self, name: str):
        return self.policies.get(self.configs[name], self.cfg.suite)

    def episode(self, key: EpisodeKey) -> Episode:
        """The engine for one episode of the plan, on the backend of its task."""
        backend = self.open(key.task_id)
        cfg = self.cfg
        return Episode(key, self.policy(key.policy), ContextMode.choice(key.mode)(), self.source, self.ontology,
                       view=cfg.view, max_steps=cfg.max_steps or backend.max_steps, style=cfg.context_style,
                       stages=cfg.suite.stages(key.task_id))

    def run(self, key: EpisodeKey) -> dict:
        """The episode's record (as results store it); raises when its infrastructure fails (after dropping a
        simulator that may be broken: the next episode builds a new one)."""
        try:
            record = run_episode(self.open(key.task_id), self.episode(key), self.video_dir, self.cfg.suite.upright)
        except InfrastructureFailure:
            raise  # the graph source failed; the simulator is fine
        except Exception:
            self.close_backend()
            raise
        finally:
            self.policies.end_served_episodes()  # the record is taken: the server's batches no longer wait for it
        record.extra.update(self.cfg.suite.record_facts())
        record.extra.update(self.configs[key.policy].record_facts())  # the weights' provenance
        release_free_memory()  # what building its simulator (at the first reset, or a hard reset's) left behind
        return record.to_json()

    @property
    def video_dir(self) -> Path | None:
        return Path(self.cfg.output_dir) / "videos" if self.cfg.video else None

    def close_runner(self) -> None:
        self.close_backend()
        self.policies.close()


_worker: Worker | None = None
_setup_error: str = ""


def end_with_parent(parent: int) -> None:
    """Be SIGKILLed when the parent ends, and end now if it already has (this process was handed to another)."""
    if not die_with_parent(signal.SIGKILL):
        log.warning("no prctl (not Linux): worker %d will not end with its parent", os.getpid())
    if os.getppid() != parent:
        os._exit(1)


def init_worker(cfg: EvalConfig, parent: int, endpoint=None) -> None:
    global _worker, _setup_error
    end_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; workers end with it
    try:
        _worker = Worker(cfg, endpoint)
    except Exception as e:  # reported with each episode this worker is given, as a message, not a traceback
        _setup_error = f"{type(e).__name__}: {e}"
        return
    atexit.register(_worker.close_runner)


def run_in_worker(episode: EpisodeKey) -> dict:
    if _worker is None:
        raise WorkerSetupError(_setup_error)
    return _worker.run(episode)


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process, as the cause of its copy in the parent."""

    def __init__(self, trace: str):
        super().__init__(trace)
        self.trace = trace

    def __str__(self) -> str:
        return self.trace


def _sendable(error: Exception) -> tuple[BaseException, str]:
    """An episode's exception as it can cross to the parent (a RuntimeError naming it when it cannot), with its
    traceback here."""
    trace = "".join(traceback.format_exception(error))
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        error = RuntimeError(f"{type(error).__name__}: {error}")
    return error, trace


def serve_episodes(cfg: EvalConfig, parent: int, endpoint, conn: Connection) -> None:
    """A worker process's life (`sgvla.eval.pool.ProcessPool`): set up (("up", why not)), then one episode at a
    time from `conn` (("done", record) or ("failed", (exception, traceback))) until it is told to end (None) or
    its parent is gone."""
    init_worker(cfg, parent, endpoint)
    conn.send(("up", _setup_error))
    if _worker is None:
        return
    while True:
        try:
            episode = conn.recv()
        except (EOFError, OSError):
            break
        if episode is None:
            break
        try:
            reply = ("done", run_in_worker(episode))
        except Exception as e:
            reply = ("failed", _sendable(e))
        conn.send(reply)
    _worker.close_runner()
