"""Run an evaluation plan: every (policy, task, perturbation, mode, seed) once, resumably.

Episodes already in the run's `episodes.jsonl` are skipped, so rerunning a killed command finishes
the plan with every episode recorded exactly once. With `workers > 1` episodes run in separate
processes (each keeps its own simulator), at most one per worker at a time; records are written by this
process only, one line per finished episode. The learned policies then live in one policy server
(`sgvla.eval.serving`, a process of its own) that batches the steps of concurrent episodes, so N workers
share one copy of the weights; a server that dies costs its running episodes (infrastructure failures) and
is restarted. `executor: ray` runs the same on a Ray cluster (`sgvla.eval.ray_executor`).

An episode whose infrastructure fails (the graph source, the simulator, a worker process) is no
result: it goes to `infra_failures.jsonl` with the reason (`sgvla.eval.results`), stays out of the
success rates, and the next run of the plan retries it; `on_infra_failure: stop` also ends the run.
The command then exits 1 and says how many episodes need a rerun.

Worker processes die with this one however it ends (SIGKILL included): each asks the kernel for
SIGKILL when its parent dies (PR_SET_PDEATHSIG) and checks that the parent is still the one that
started it.
"""

import atexit
import logging
import os
import signal
import traceback
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import partial
from multiprocessing import get_context
from pathlib import Path

# Headless rendering unless the environment says otherwise. MuJoCo picks its GL backend when it is first
# imported (below, through the policies), so this must come first; later it would be too late.
os.environ.setdefault("MUJOCO_GL", "egl")

from tqdm import tqdm  # noqa: E402

from sgvla.core.context import ContextMode  # noqa: E402
from sgvla.core.episode import Episode, EpisodeKey, InfrastructureFailure  # noqa: E402
from sgvla.core.processes import die_with_parent  # noqa: E402
from sgvla.eval.config import EvalConfig  # noqa: E402
from sgvla.eval.loop import run_episode  # noqa: E402
from sgvla.eval.order import plan  # noqa: E402
from sgvla.eval.results import INFRA_FAILURES  # noqa: E402
from sgvla.eval.run_dir import RunDir  # noqa: E402
from sgvla.eval.serving import build_policy_server, served_policies  # noqa: E402
from sgvla.policies.remote import LocalServer, PolicyServerLost  # noqa: E402
from sgvla.policies.session import PolicySession  # noqa: E402
from sgvla.scene_graph import load_ontology  # noqa: E402

log = logging.getLogger(__name__)
__all__ = ["check_in_process", "plan", "run_plan", "validate", "Worker"]


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
                       view=cfg.view, max_steps=cfg.max_steps or backend.max_steps, style=cfg.context_style)

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
        record.extra.update(self.cfg.suite.record_facts())
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


def _init_worker(cfg: EvalConfig, parent: int, endpoint=None) -> None:
    global _worker, _setup_error
    end_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; workers end with it
    try:
        _worker = Worker(cfg, endpoint)
    except Exception as e:  # reported with each episode this worker is given, as a message, not a traceback
        _setup_error = f"{type(e).__name__}: {e}"
        return
    atexit.register(_worker.close_runner)


def _run_in_worker(episode: EpisodeKey) -> dict:
    if _worker is None:
        raise WorkerSetupError(_setup_error)
    return _worker.run(episode)


def check_in_process(cfg: EvalConfig) -> None:
    """Fail unless the plan's suite can run in this process (a physical arm's suite runs over its topics)."""
    if not cfg.suite.in_process:
        raise ValueError(f"the {cfg.suite.type} suite runs over the robot's topics, not in process: "
                         "`sgvla launch so101_eval eval_config=...`")


def validate(cfg: EvalConfig) -> None:
    """Fail before the first episode on what the config alone cannot tell: the graph source's environment (a VLM
    client's file, its API key, the cameras it needs)."""
    cfg.graph_source.check_environment(cfg)


@dataclass
class RunSummary:
    path: Path  # episodes.jsonl
    planned: int
    recorded: int  # results written by this run
    infra_failed: int  # infrastructure failures recorded by this run
    outstanding: dict  # EpisodeKey -> last infrastructure failure, for plan episodes without a result
    not_run: int  # plan episodes this run did not get to (it stopped)
    stopped: str = ""  # why the run ended before the plan did
    superseded: Path | None = None  # where --new-run moved the previous run
    policy_server: dict = field(default_factory=dict)  # the policy server's batching stats, per served policy

    @property
    def complete(self) -> bool:
        return not self.outstanding and not self.not_run and not self.stopped


def _classify(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, InfrastructureFailure):
        return exc.kind, str(exc)
    if isinstance(exc, BrokenProcessPool):
        return "worker_lost", f"the worker process running it died ({exc})"
    return "error", f"{type(exc).__name__}: {exc}"


def _in_process(cfg: EvalConfig, todo: list[EpisodeKey], stop: Callable[[], bool], server=None) -> Iterator:
    try:
        worker = Worker(cfg, server.endpoint if server else None)
    except Exception as e:
        raise WorkerSetupError(f"{type(e).__name__}: {e}") from e
    try:
        for episode in todo:
            if stop():
                return
            try:
                outcome = worker.run(episode)
            except Exception as e:
                outcome = e
            yield episode, outcome
            if isinstance(outcome, PolicyServerLost) and server is not None and not server.alive:
                server.restart()
    finally:
        worker.close_runner()


def _in_pool(cfg: EvalConfig, todo: list[EpisodeKey], stop: Callable[[], bool], server=None) -> Iterator:
    """Episodes on `cfg.workers` processes, one each at a time, so a lost worker costs only the episodes then
    running; those are reported as `BrokenProcessPool` and a new pool runs the rest. A lost policy server costs
    the episodes then running (`PolicyServerLost`) and is restarted before the next is submitted."""
    queue = deque(todo)
    pool: ProcessPoolExecutor | None = None
    running: dict = {}
    finished = False
    try:
        while queue or running:
            if pool is None:
                pool = ProcessPoolExecutor(cfg.workers, mp_context=get_context("spawn"), initializer=_init_worker,
                                           initargs=(cfg, os.getpid(), server.endpoint if server else None))
            lost = False
            if server is not None and not server.alive:
                server.restart()
            while queue and len(running) < cfg.workers and not stop():
                try:
                    running[pool.submit(_run_in_worker, queue[0])] = queue[0]
                except BrokenProcessPool:  # a worker died while idle: no episode was lost with it
                    lost = True
                    break
                queue.popleft()
            if not running and not lost:
                break
            if running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                lost = lost or any(isinstance(f.exception(), BrokenProcessPool) for f in done)
            else:
                done = set()
            if lost:  # every episode of a broken pool fails with it
                done = set(running)
                wait(running, timeout=60)
            for future in done:
                episode = running.pop(future)
                exc = future.exception() if future.done() else BrokenProcessPool("the pool broke")
                yield episode, exc if exc is not None else future.result()
            if lost:
                pool.shutdown(wait=True, cancel_futures=True)
                pool = None
        finished = True
    finally:
        if pool is not None:
            if not finished:  # interrupted: end the workers now rather than when this process ends
                for process in list(getattr(pool, "_processes", {}).values()):
                    process.kill()
            pool.shutdown(wait=finished, cancel_futures=True)


def run_plan(cfg: EvalConfig, progress: bool = True, new_run: bool = False) -> RunSummary:
    """Run what is missing of the plan (see the module docstring)."""
    check_in_process(cfg)
    with RunDir.open(cfg, new_run=new_run) as run:
        results, infra = run.results, run.infra
        keys = {k: k for k in plan(cfg)}
        todo = [e for k, e in keys.items() if k not in results]
        bar = tqdm(total=len(keys), initial=len(keys) - len(todo), desc=cfg.name, unit="ep", disable=not progress)
        wins: Counter = Counter()
        counts: Counter = Counter()
        stopped = ""
        server = None
        server_stats: dict = {}
        if todo and cfg.executor == "local" and served_policies(cfg):
            try:
                server = LocalServer(partial(build_policy_server, cfg)).start()
            except RuntimeError as e:
                todo, stopped = [], f"a worker could not be set up, so no episode can run: {e}"
        outcomes = _executor(cfg)(cfg, todo, lambda: bool(stopped), server)
        try:
            for episode, outcome in outcomes:
                if isinstance(outcome, WorkerSetupError):
                    raise outcome
                if isinstance(outcome, dict):
                    results.append(outcome)
                    counts["recorded"] += 1
                    wins[outcome["mode"]] += outcome["success"]
                else:
                    kind, reason = _classify(outcome)
                    trace = "".join(traceback.format_exception(outcome))[-4000:] if kind == "error" else None
                    infra.add(episode, kind, reason, **({"traceback": trace} if trace else {}))
                    counts["infra"] += 1
                    log.warning("episode %s: infrastructure failure, not a result (%s); recorded in %s, the next run "
                                "of this plan retries it", tuple(episode), reason, INFRA_FAILURES)
                    if cfg.on_infra_failure == "stop" and not stopped:
                        stopped = f"on_infra_failure=stop, after an infrastructure failure: {reason}"
                bar.set_postfix({**{m: wins[m] for m in cfg.modes}, **({"infra": counts["infra"]} if counts["infra"]
                                                                        else {})})
                bar.update()
        except WorkerSetupError as e:
            stopped = f"a worker could not be set up, so no episode can run: {e}"
        finally:
            outcomes.close()  # ends the workers now if this run was interrupted
            bar.close()
            if server is not None:
                server_stats = server.stats()
                server.stop()
        outstanding = {k: r for k, r in infra.outstanding(results).items() if k in keys}
        not_run = sum(k not in results and k not in outstanding for k in keys)
        return RunSummary(results.path, len(keys), counts["recorded"], counts["infra"], outstanding, not_run,
                          stopped, run.superseded, server_stats)


def _executor(cfg: EvalConfig) -> Callable[..., Iterator]:
    """How the plan's episodes run: (cfg, todo, stop, server) -> (episode, record or exception) as they end."""
    if cfg.executor == "ray":
        from sgvla.eval.ray_executor import in_ray

        return in_ray
    return _in_process if cfg.workers == 1 else _in_pool
