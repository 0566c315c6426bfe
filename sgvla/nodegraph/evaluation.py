"""The evaluator node's bookkeeping, ROS-free: the plan of `sgvla eval`, resumable results, records.

The node runs `plan(cfg)` in order (what `run_plan` does with one worker), skipping episodes already in
the run's `episodes.jsonl`, and writes the same files: `config.yaml`, `episodes.jsonl`,
`infra_failures.jsonl` (episodes the node graph failed to run: retried by the next run) and the report.
It takes the output folder as `sgvla eval` does (`RunDir`: locked, one plan per folder).
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sgvla.eval.config import EvalConfig
from sgvla.eval.loop import Episode
from sgvla.eval.results import EpisodeKey
from sgvla.eval.run_dir import RunDir
from sgvla.eval.runner import plan, policy_name, validate
from sgvla.nodegraph.episode import EpisodeSpec, SimSettings, episode_record
from sgvla.paths import resolve_data_path

log = logging.getLogger(__name__)


def parse_overrides(text: str) -> dict[str, Any]:
    """Plan overrides from one string: a YAML mapping (`{tasks: [0], policies: [{type: expert}]}`) or
    `key=value` items as `sgvla eval` takes them, shell-quoted (`tasks=[0] 'policies=[{type: expert}]'`)."""
    from sgvla.core.config import ConfigError, parse_override

    text = text.strip()
    if text.startswith("{"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"overrides {text!r}: not a YAML mapping ({e})") from None
        if isinstance(data, dict):
            return {str(k): v for k, v in data.items()}
    return dict(parse_override(o) for o in shlex.split(text))


def load_eval_config(config: str, overrides: str = "", output_dir: str = "") -> EvalConfig:
    """An `EvalConfig` from a YAML file and overrides (`parse_overrides`), as `sgvla eval` builds it."""
    from sgvla.core.config import load_config

    items = parse_overrides(overrides)
    if output_dir:
        items["output_dir"] = output_dir
    cfg = load_config(EvalConfig, resolve_data_path(config), items)
    validate(cfg)
    if cfg.graph_source != "ground_truth":
        raise ValueError(f"graph_source={cfg.graph_source!r} is not wired into the node graph yet (the scene_graph "
                         "node publishes ground truth); use graph_source=ground_truth or `sgvla eval`")
    return cfg


@dataclass
class Pending:
    """The episode in flight."""

    number: int
    episode: Episode
    spec: EpisodeSpec
    started: float
    reset: dict[str, Any] | None = None  # the sim_bridge's reset answer
    final: dict[str, Any] | None = None  # success, steps of the last state
    report: dict[str, Any] | None = None  # the policy node's report


class TopicEvaluation:
    """Plan, results and records of one evaluation over topics."""

    def __init__(self, cfg: EvalConfig, first_episode_number: int = 1):
        self.cfg = cfg
        self.run_dir = RunDir.open(cfg)  # held (locked) for the life of this process
        self.out = self.run_dir.path
        self.results = self.run_dir.results
        self.specs = {policy_name(p): p for p in cfg.policies}
        self.todo = [e for e in plan(cfg) if EpisodeKey(*dataclasses.astuple(e)) not in self.results]
        self.total = len(plan(cfg))
        self.failed = 0
        self.finished = 0
        self.next_number = first_episode_number
        self.render_images = cfg.needs_images  # as Worker: the simulator renders only when images are needed
        if cfg.workers > 1:
            log.info("workers=%d: over topics one sim_bridge runs the episodes one after another", cfg.workers)

    def start_next(self) -> Pending | None:
        if not self.todo:
            return None
        episode = self.todo.pop(0)
        number = self.next_number
        self.next_number += 1
        cfg = self.cfg
        spec = EpisodeSpec(number, self.specs[episode.policy], episode.policy, episode.task_id, episode.perturbation,
                           episode.mode, episode.seed, cfg.image_size, cfg.view, cfg.context_style, cfg.graph_source)
        return Pending(number, episode, spec, time.perf_counter())

    def settings(self, pending: Pending) -> SimSettings:
        return SimSettings(pending.episode.task_id, pending.episode.perturbation, self.cfg.render_profile,
                           self.cfg.image_size, self.render_images)

    def finish(self, pending: Pending) -> dict[str, Any]:
        """Write the record of a finished episode (reset, final state and report all in)."""
        reset, final = pending.reset, pending.final
        record = episode_record(
            pending.episode, success=final["success"], steps=final["steps"], max_steps=reset["max_steps"],
            wall_s=time.perf_counter() - pending.started, task=reset["task"], view=self.cfg.view,
            graph_source=self.cfg.graph_source, render_profile=self.cfg.render_profile,
            perturbation_applied=reset["perturbation_applied"], report=pending.report)
        self.results.append(record)
        self.finished += 1
        return record

    def fail(self, pending: Pending, reason: str) -> None:
        """An episode the node graph could not run: an infrastructure failure, retried by the next run."""
        self.failed += 1
        key = EpisodeKey(*dataclasses.astuple(pending.episode))
        self.run_dir.infra.add(key, "node_graph", reason)
        log.error("episode %s: infrastructure failure, not a result (%s); the next run retries it", pending.episode,
                  reason)

    def write_report(self) -> dict[str, Path]:
        from sgvla.eval.report import markdown_table, write_report

        records = list(self.results.records())
        if not records:
            return {}
        outstanding = list(self.run_dir.infra.outstanding(self.results).values())
        paths = write_report(self.out, records, outstanding)
        print(markdown_table(records, outstanding), flush=True)
        return paths
