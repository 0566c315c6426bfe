"""The evaluator node's bookkeeping, ROS-free: the plan of `sgvla eval`, episode goals, resumable results.

The node sends `plan(cfg)` in order (what `run_plan` does with one worker) as `run_episode` goals, skipping
episodes already in the run's `episodes.jsonl`, and writes the same files from the records the policy node
returns: `config.yaml`, `episodes.jsonl`, `infra_failures.jsonl` (episodes whose machinery failed: retried by
the next run; episodes an operator marked invalid, kind ``invalid``: redone at once) and the report. It takes the
output folder and keeps it as `sgvla eval` does (`RunDir`: locked, one plan per folder; `Bookkeeping`: what is to
do, what was recorded, what to rerun).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgvla.core.config import to_mapping
from sgvla.core.episode import EpisodeKey, EpisodeRecord
from sgvla.core.graph_source import GraphSourceConfig
from sgvla.eval.bookkeeping import Bookkeeping
from sgvla.eval.config import EvalConfig
from sgvla.eval.run_dir import RunDir
from sgvla.eval.runner import validate
from sgvla.core.config import parse_line
from sgvla.paths import resolve_data_path

log = logging.getLogger(__name__)


def load_eval_config(config: str, overrides: str = "", output_dir: str = "") -> EvalConfig:
    """An `EvalConfig` from a YAML file and overrides (`key=value` items as `sgvla eval` takes them, in one string:
    space-separated, shell-quoted), as `sgvla eval` builds it."""
    from sgvla.core.config import load_config

    items = parse_line(overrides)
    if output_dir:
        items["output_dir"] = output_dir
    cfg = load_config(EvalConfig, resolve_data_path(config), items, source="overrides")  # the parameter, by name
    validate(cfg)
    if not cfg.graph_source.over_topics:
        carried = sorted(name for name, c in GraphSourceConfig.choices().items() if c.over_topics)
        raise ValueError(f"graph_source={cfg.graph_source.type!r} is not wired into the node graph yet (the "
                         "scene_graph node publishes the graphs of the scene: the simulator's, or with the suite's "
                         f"perception the perceived one); use graph_source={' or '.join(carried)}, or `sgvla eval`")
    return cfg


@dataclass(frozen=True)
class Goal:
    """One episode as the `run_episode` action's goal carries it (sgvla_interfaces/action/RunEpisode)."""

    episode: int  # the episode counter: every message of the episode carries it
    key: EpisodeKey
    policy_type: str
    policy_options: dict[str, Any]
    view: str
    context_style: str
    graph_source: str
    max_steps: int  # 0: the environment's limit
    suite: str
    suite_options: dict[str, Any]
    render_images: bool


class TopicEvaluation:
    """Plan, results and records of one evaluation over topics."""

    def __init__(self, cfg: EvalConfig, first_episode_number: int = 1):
        self.cfg = cfg
        self.run_dir = RunDir.open(cfg)  # held (locked) for the life of this process
        self.book = Bookkeeping(cfg, self.run_dir)
        self.out = self.run_dir.path
        self.results = self.run_dir.results
        self.configs = {p.display_name: p for p in cfg.policies}
        self.todo = self.book.todo  # the episodes still to run, in order (an invalid one goes back to the front)
        self.total = self.book.total
        self.next_number = first_episode_number
        if cfg.workers > 1:
            log.info("workers=%d: over topics one environment node runs the episodes one after another", cfg.workers)

    @property
    def finished(self) -> int:
        return self.book.counts["recorded"]

    @property
    def failed(self) -> int:
        return self.book.counts["infra"]

    @property
    def invalid(self) -> int:
        """Episodes the operator marked invalid (redone at once)."""
        return self.book.counts["invalid"]

    def next_goal(self) -> Goal | None:
        if not self.todo:
            return None
        key = self.todo.pop(0)
        number, self.next_number = self.next_number, self.next_number + 1
        cfg = self.cfg
        policy = to_mapping(self.configs[key.policy])
        suite = to_mapping(cfg.suite)
        return Goal(number, key, policy.pop("type"), policy, cfg.view, cfg.context_style, cfg.graph_source.type,
                    cfg.max_steps or 0, suite.pop("type"), suite, cfg.needs_images)

    def finish(self, record: EpisodeRecord) -> dict[str, Any]:
        """Keep the record the policy node returned: a result, or an infrastructure failure (retried next run); an
        episode the operator marked invalid is logged with its note and goes back to the front of the queue."""
        if record.extra.get("verdict") == "invalid":  # the operator's redo: no result; the same episode next
            # the note, and where its rollout was saved (kept and marked invalid, so it can be replayed too)
            notes = {k: v for k, v in record.extra.items()
                     if k in ("verdict_source", "operator_note") or k.startswith("rollout_")}
            self.book.redo(record.key, record.infra_failure, **notes)
            return {}
        if record.infra_failure:
            self.fail(record.key, record.infra_failure)
            return {}
        record.extra.update(self.cfg.suite.record_facts())
        if record.key.policy in self.configs:  # the weights' provenance, as sgvla eval's workers record it
            record.extra.update(self.configs[record.key.policy].record_facts())
        data = record.to_json()
        self.book.record(data)
        return data

    def fail(self, key: EpisodeKey, reason: str) -> None:
        """An episode the node graph could not run: an infrastructure failure, retried by the next run."""
        self.book.fail(key, "node_graph", reason)

    def write_report(self) -> dict[str, Path]:
        """The run's report files, and on stdout the summary `sgvla eval` prints (at most 100 columns; the wide
        per-task table is in table.md)."""
        from sgvla.eval.report import SequentialPlan, write_report
        from sgvla.eval.terminal_summary import terminal_summary

        records = list(self.results.records())
        if not records:
            return {}
        outstanding = list(self.book.outstanding().values())
        plan = SequentialPlan.stored(self.out)
        paths = write_report(self.out, records, outstanding, plan)
        print(terminal_summary(records, outstanding, plan, paths["html"]), flush=True)
        return paths
