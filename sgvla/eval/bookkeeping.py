"""A run's bookkeeping, whoever runs its episodes: what of the plan is to do, what was recorded, what to rerun.

`sgvla eval` (`sgvla.eval.runner`, over a worker pool) and the evaluator node (`sgvla.nodegraph.evaluation`, over
topics) both keep their run folder with it, so both resume alike: episodes already in the folder's `episodes.jsonl`
are not run again, an episode whose infrastructure failed goes to `infra_failures.jsonl` with its reason (never a
result; the next run of the plan retries it), and one an operator marked invalid is logged there too and redone at
once.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from sgvla.core.episode import EpisodeKey
from sgvla.eval.config import EvalConfig
from sgvla.eval.order import plan
from sgvla.eval.results import INFRA_FAILURES
from sgvla.eval.run_dir import RunDir

log = logging.getLogger(__name__)


class Bookkeeping:
    """The plan of `cfg` against the records of `run` (its folder, opened and locked)."""

    def __init__(self, cfg: EvalConfig, run: RunDir):
        self.cfg, self.run = cfg, run
        self.results, self.infra = run.results, run.infra
        self.keys = {k: k for k in plan(cfg)}  # the plan's episodes, in order
        self.todo: list[EpisodeKey] = [k for k in self.keys if k not in self.results]
        self.wins: Counter = Counter()  # successes by (policy, mode), of this run's records
        self.counts: Counter = Counter()  # records by (policy, mode), and "recorded", "infra", "invalid" in all

    @property
    def total(self) -> int:
        return len(self.keys)

    def record(self, record: dict[str, Any]) -> None:
        """Keep an episode's result."""
        self.results.append(record)
        self.counts["recorded"] += 1
        self.wins[record["policy"], record["mode"]] += record["success"]
        self.counts[record["policy"], record["mode"]] += 1

    def fail(self, key: EpisodeKey, kind: str, reason: str, **details: Any) -> None:
        """An episode whose infrastructure failed: no result; the next run of the plan retries it."""
        self.infra.add(key, kind, reason, **details)
        self.counts["infra"] += 1
        log.warning("episode %s: infrastructure failure, not a result (%s); recorded in %s, the next run of this plan "
                    "retries it", tuple(key), reason, INFRA_FAILURES)

    def redo(self, key: EpisodeKey, reason: str, **notes: Any) -> None:
        """An episode an operator marked invalid: logged with their notes, and the next one to run."""
        self.infra.add(key, "invalid", reason, **notes)
        self.counts["invalid"] += 1
        self.todo.insert(0, key)
        log.info("episode %s marked invalid by the operator; running it again", tuple(key))

    def outstanding(self) -> dict[EpisodeKey, dict]:
        """The plan's episodes without a result whose last attempt failed on infrastructure, with that failure."""
        return {k: r for k, r in self.infra.outstanding(self.results).items() if k in self.keys}

    def not_run(self, outstanding: dict) -> int:
        """The plan's episodes neither recorded nor failed (a run that stopped did not get to them)."""
        return sum(k not in self.results and k not in outstanding for k in self.keys)
