"""Two runs' records, episode by episode: which matched episodes differ in success, steps or actions, and whether
the two plans differ in a setting that changes outcomes (`sgvla compare`).

A run is a run folder (``episodes.jsonl``, with the plan in ``config.yaml``) or a records file alone (what
``lerobot-eval --env.records=FILE`` writes). Episodes match by their key (task, perturbation, mode, seed, policy);
when each run holds one policy under different names (``prompt_grounded`` in `sgvla eval`, ``lerobot`` in
`lerobot-eval`), by the rest of the key. Actions compare by the records' `action_digest`
(`sgvla.core.action_digest`); a record without one (written before digests existed) leaves its actions unchecked.

Plans: the settings that change a matched episode's outcome are those outside `run_dir.HARMLESS` (where and how
episodes run) and outside what only chooses which episodes exist (tasks, seeds, modes, order, shard, alpha). Where a
run has no stored plan, the records' own settings (step limit, view, graph source, render profile, perturbation as
applied) are compared per matched episode instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sgvla.core.episode import EpisodeKey
from sgvla.eval.results import RESULTS, CorruptRecords, ResultsFile
from sgvla.eval.run_dir import HARMLESS, PLAN, plan_differences

# Plan settings that choose which episodes exist, not what one of them does.
WHICH_EPISODES = frozenset({"tasks", "episodes", "seed_offset", "modes", "order", "shard", "alpha"})
# Record fields that state how an episode was run: compared where a run has no stored plan.
RECORD_SETTINGS = ("max_steps", "view", "graph_source", "render_profile", "perturbation_applied")
OUTCOME = ("success", "steps", "action_digest")


class CompareError(ValueError):
    """A run that cannot be compared; the message names it and why."""


@dataclass
class Run:
    path: Path
    records: dict[EpisodeKey, dict]  # results only (no infrastructure failures)
    plan: dict[str, Any] | None  # the stored plan; None for a records file

    @property
    def policies(self) -> list[str]:
        return sorted({k.policy for k in self.records})


def load_run(path: str | Path) -> Run:
    """A run folder or a records file (see the module docstring)."""
    path = Path(path)
    if path.is_dir():
        file, plan_file = path / RESULTS, path / PLAN
        if not file.is_file():
            raise CompareError(f"{path}: no {RESULTS} in this folder: not a run folder of `sgvla eval`")
        plan = yaml.safe_load(plan_file.read_text()) if plan_file.is_file() else None
    elif path.is_file():
        file, plan = path, None
    else:
        raise CompareError(f"{path}: no such run folder or records file")
    try:
        records = list(ResultsFile(file, writable=False).records())
    except CorruptRecords as e:
        raise CompareError(str(e)) from None
    results = {EpisodeKey.of(r): r for r in records if not r.get("infra_failure")}
    if not results:
        raise CompareError(f"{file}: no episode results to compare")
    return Run(path, results, plan if isinstance(plan, dict) else None)


@dataclass
class Difference:
    key: EpisodeKey  # run A's key
    fields: dict[str, tuple[Any, Any]]  # field -> (A's value, B's value)


@dataclass
class Comparison:
    matched: int
    differing: list[Difference]
    only_a: list[EpisodeKey]
    only_b: list[EpisodeKey]
    plan_differences: list[str]
    plans_compared: bool
    actions_unchecked: int  # matched episodes whose records lack a digest
    policies: tuple[list[str], list[str]]
    by_policy: bool  # matched with the policy's name in the key


def _match_key(key: EpisodeKey, by_policy: bool) -> tuple:
    return tuple(key) if by_policy else (key.task_id, key.perturbation, key.mode, key.seed)


def _differences(a: Mapping[str, Any], b: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, tuple[Any, Any]]:
    return {n: (a.get(n), b.get(n)) for n in names if a.get(n) != b.get(n)}


def compare_runs(a: Run, b: Run) -> Comparison:
    by_policy = not (len(a.policies) == 1 and len(b.policies) == 1 and a.policies != b.policies)
    index_b = {_match_key(k, by_policy): k for k in b.records}
    matched, only_a, differing, unchecked, setting_diffs = [], [], [], 0, {}
    for key, record in a.records.items():
        other_key = index_b.pop(_match_key(key, by_policy), None)
        if other_key is None:
            only_a.append(key)
            continue
        other = b.records[other_key]
        matched.append(key)
        names = OUTCOME
        if not record.get("action_digest") or not other.get("action_digest"):
            names, unchecked = ("success", "steps"), unchecked + 1
        diff = _differences(record, other, names)
        if diff:
            differing.append(Difference(key, diff))
        for name, values in _differences(record, other, RECORD_SETTINGS).items():
            setting_diffs.setdefault((name, *map(json.dumps, values)), []).append(key)
    plans_compared = a.plan is not None and b.plan is not None
    if plans_compared:
        plan_diffs = plan_differences(a.plan, b.plan, HARMLESS | WHICH_EPISODES)
    else:
        plan_diffs = [f"{name}: {va} -> {vb} (in {len(keys)} matched episode(s))"
                      for (name, va, vb), keys in setting_diffs.items()]
    return Comparison(len(matched), differing, only_a, sorted(index_b.values()), plan_diffs, plans_compared,
                      unchecked, (a.policies, b.policies), by_policy)
