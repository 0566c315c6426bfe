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

Worker processes (`sgvla.eval.worker`) die with this one however it ends (SIGKILL included).
"""

import logging
import os
import traceback
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import partial
from multiprocessing import get_context
from pathlib import Path

# First: the worker module picks headless rendering before anything loads MuJoCo.
from sgvla.eval.worker import Worker, WorkerSetupError, init_worker, run_in_worker  # noqa: I001

from tqdm import tqdm

from sgvla.core.episode import EpisodeKey, InfrastructureFailure
from sgvla.eval.config import EvalConfig
from sgvla.eval.order import plan
from sgvla.eval.results import INFRA_FAILURES
from sgvla.eval.run_dir import RunDir
from sgvla.eval.serving import build_policy_server, served_policies
from sgvla.policies.remote import LocalServer, PolicyServerLost

log = logging.getLogger(__name__)
__all__ = ["check_in_process", "plan", "run_plan", "validate", "Worker", "WorkerSetupError"]


def check_in_process(cfg: EvalConfig) -> None:
    """Fail unless the plan's suite can run in this process (a physical arm's suite runs over its topics)."""
    if not cfg.suite.in_process:
        raise ValueError(f"the {cfg.suite.type} suite runs over the robot's topics, not in process: "
                         "`sgvla launch so101_eval eval_config=...`")


def validate(cfg: EvalConfig) -> None:
    """Fail before the first episode on what the config alone cannot tell: the graph source's environment (a VLM
    client's file, its API key, the cameras it needs), and each learned policy's weights (every parameter from its
    checkpoint, or random on purpose: `sgvla.policies.weights`)."""
    cfg.graph_source.check_environment(cfg)
    check_weights(cfg)


def check_weights(cfg: EvalConfig) -> None:
    """Each policy's weights checked (once per config) and their provenance filled into its entry (the stored plan)."""
    for policy in cfg.policies:
        policy.check_weights()


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
                pool = ProcessPoolExecutor(cfg.workers, mp_context=get_context("spawn"), initializer=init_worker,
                                           initargs=(cfg, os.getpid(), server.endpoint if server else None))
            lost = False
            if server is not None and not server.alive:
                server.restart()
            while queue and len(running) < cfg.workers and not stop():
                try:
                    running[pool.submit(run_in_worker, queue[0])] = queue[0]
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


def progress_counts(cfg: EvalConfig, wins: Counter, counts: Counter) -> str:
    """The progress bar's successes so far, k/n per mode for each policy apart (a privileged sanity arm pooled with
    the policy under test said nothing about either), and the infrastructure failures."""
    from sgvla.eval.report import short

    parts = []
    for p in cfg.policies:
        cells = [f"{short(m)} {wins[p.display_name, m]}/{counts[p.display_name, m]}" for m in cfg.modes
                 if counts[p.display_name, m]]
        parts += [f"{p.display_name}: {' '.join(cells)}"] if cells else []
    return " | ".join(parts + ([f"infra {counts['infra']}"] if counts["infra"] else []))


def run_plan(cfg: EvalConfig, progress: bool = True, new_run: bool = False) -> RunSummary:
    """Run what is missing of the plan (see the module docstring)."""
    check_in_process(cfg)
    check_weights(cfg)
    with RunDir.open(cfg, new_run=new_run) as run:
        results, infra = run.results, run.infra
        keys = {k: k for k in plan(cfg)}
        todo = [e for k, e in keys.items() if k not in results]
        bar = tqdm(total=len(keys), initial=len(keys) - len(todo), desc=cfg.name, unit="ep",
                   disable=not progress or not todo)  # nothing to run: no bar (the command says so)
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
        outcomes = _executor(cfg, server_stats)(cfg, todo, lambda: bool(stopped), server)
        try:
            for episode, outcome in outcomes:
                if isinstance(outcome, WorkerSetupError):
                    raise outcome
                if isinstance(outcome, dict):
                    results.append(outcome)
                    counts["recorded"] += 1
                    wins[outcome["policy"], outcome["mode"]] += outcome["success"]
                    counts[outcome["policy"], outcome["mode"]] += 1
                else:
                    kind, reason = _classify(outcome)
                    trace = "".join(traceback.format_exception(outcome))[-4000:] if kind == "error" else None
                    infra.add(episode, kind, reason, **({"traceback": trace} if trace else {}))
                    counts["infra"] += 1
                    log.warning("episode %s: infrastructure failure, not a result (%s); recorded in %s, the next run "
                                "of this plan retries it", tuple(episode), reason, INFRA_FAILURES)
                    if cfg.on_infra_failure == "stop" and not stopped:
                        stopped = f"on_infra_failure=stop, after an infrastructure failure: {reason}"
                bar.set_postfix_str(progress_counts(cfg, wins, counts), refresh=False)
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


def _executor(cfg: EvalConfig, server_stats: dict) -> Callable[..., Iterator]:
    """How the plan's episodes run: (cfg, todo, stop, server) -> (episode, record or exception) as they end. The
    Ray executor's policy server is an actor of its own, whose stats it puts into `server_stats`."""
    if cfg.executor == "ray":
        from sgvla.eval.ray_executor import in_ray

        return partial(in_ray, stats=server_stats)
    return _in_process if cfg.workers == 1 else _in_pool
