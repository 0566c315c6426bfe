"""Run an evaluation plan: every (policy, task, perturbation, mode, seed) once, resumably.

Episodes already in the run's `episodes.jsonl` are skipped (`sgvla.eval.bookkeeping`), so rerunning a killed
command finishes the plan with every episode recorded exactly once. The plan's executor (`sgvla.eval.executor`)
gives the worker pool the one scheduling loop (`sgvla.eval.schedule`) feeds: with `workers > 1` episodes run in
separate processes (each keeps its own simulator), at most one per worker at a time, or as actors of a Ray cluster
(`executor: ray`); records are written by this process only, one line per finished episode. The learned policies
then live in one policy server (`sgvla.policies.serving`, a process or actor of its own) that batches the steps of
concurrent episodes, so N workers share one copy of the weights; a server that dies costs its running episodes
(infrastructure failures) and is restarted.

An episode whose infrastructure fails (the graph source, the simulator, a worker process) is no
result: it goes to `infra_failures.jsonl` with the reason (`sgvla.eval.results`), stays out of the
success rates, and the next run of the plan retries it; `on_infra_failure: stop` also ends the run.
The command then exits 1 and says how many episodes need a rerun. A lost worker costs only the episode it ran.

Worker processes (`sgvla.eval.worker`) die with this one however it ends (SIGKILL included).
"""

import logging
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# First: the worker module picks headless rendering before anything loads MuJoCo.
from sgvla.eval.worker import Worker, WorkerSetupError  # noqa: I001

from tqdm import tqdm

from sgvla.core.episode import InfrastructureFailure
from sgvla.eval.bookkeeping import Bookkeeping
from sgvla.eval.config import EvalConfig
from sgvla.eval.order import plan
from sgvla.eval.run_dir import RunDir
from sgvla.eval.schedule import schedule

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
    return "error", f"{type(exc).__name__}: {exc}"


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
        book = Bookkeeping(cfg, run)
        bar = tqdm(total=book.total, initial=book.total - len(book.todo), desc=cfg.name, unit="ep",
                   disable=not progress or not book.todo)  # nothing to run: no bar (the command says so)
        stopped = ""
        server_stats: dict = {}
        pool = cfg.executor.pool(cfg)
        outcomes = schedule(pool, list(book.todo), lambda: bool(stopped))
        try:
            for episode, outcome in outcomes:
                if isinstance(outcome, dict):
                    book.record(outcome)
                else:
                    kind, reason = _classify(outcome)
                    trace = "".join(traceback.format_exception(outcome))[-4000:] if kind == "error" else None
                    book.fail(episode, kind, reason, **({"traceback": trace} if trace else {}))
                    if cfg.on_infra_failure == "stop" and not stopped:
                        stopped = f"on_infra_failure=stop, after an infrastructure failure: {reason}"
                bar.set_postfix_str(progress_counts(cfg, book.wins, book.counts), refresh=False)
                bar.update()
        except WorkerSetupError as e:
            stopped = f"a worker could not be set up, so no episode can run: {e}"
        finally:
            outcomes.close()
            bar.close()
            if pool.server is not None:
                server_stats = pool.server.stats()
            pool.close()  # ends the workers now if this run was interrupted
        outstanding = book.outstanding()
        return RunSummary(run.results.path, book.total, book.counts["recorded"], book.counts["infra"], outstanding,
                          book.not_run(outstanding), stopped, run.superseded, server_stats)
