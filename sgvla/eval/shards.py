"""Shards of an evaluation plan, so that a batch scheduler (a SLURM array) runs one plan as N independent jobs
without Ray, and `sgvla merge` joins their run folders into one run of the whole plan.

A plan's ``shard: i/N`` selects part of its episodes (`shard_keys`), which ``sgvla eval`` runs into a folder of
its own. The unit dealt out is the matched block, every mode and policy of one (task, perturbation, seed): each
shard's own table then holds complete matched pairs only, and no pair waits on two jobs. Blocks are dealt
round-robin in plan order (block k to shard k mod N), so shards differ by at most one block, and which shard holds
an episode depends on the plan alone (not on the machine or on what has run): rerunning a shard's command
resumes exactly its episodes. The stored plan (``config.yaml``) includes ``shard``, so resuming a folder with
another shard is refused like any other change of plan (`sgvla.eval.run_dir`).

`merge_shards` checks that the folders are the N shards of one plan (the same settings, apart from ``shard`` and
those that change no outcome, `run_dir.HARMLESS`), each given once, with every episode of the plan recorded
exactly once, in the folder of its shard; `write_merged` writes the result as a run folder of the whole plan
(``shard: 0/1``) that `sgvla report` reads like any other; a merge with --allow-missing also writes which episodes
it lacks (``missing.jsonl``), so that every report of the folder says it is partial (`partial_merge`). Problems are `MergeError`s that name the folders, the
episodes or settings concerned, and what to do.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from sgvla.core.config import ConfigError, from_mapping, load_yaml
from sgvla.core.episode import EpisodeKey
from sgvla.eval.config import EvalConfig, parse_shard, upgrade_stored  # noqa: F401  (parse_shard: part of this API)
from sgvla.eval.order import block, plan, shard_index, shard_keys  # noqa: F401  (what a shard is: part of this API)
from sgvla.eval.results import INFRA_FAILURES, RESULTS, CorruptRecords, InfraFailures, ResultsFile, open_records
from sgvla.eval.run_dir import HARMLESS, HARMLESS_CLIENT, PLAN, VLM_CLIENT, plan_differences, stored_settings

WHOLE = "0/1"  # the shard that is the whole plan
SHOWN = 10  # episodes listed by name in a message; the rest are counted
MISSING = "missing.jsonl"  # a partial merge's episodes without a result, one key per line


class MergeError(ValueError):
    """Shard folders that cannot be merged; the message names them, the problem and what to do."""


@dataclass
class ShardRun:
    """One shard's run folder, read only: its stored plan and records."""

    path: Path
    cfg: EvalConfig
    client: dict | None  # vlm_client.yaml as stored, for VLM graphs
    results: ResultsFile
    infra: InfraFailures

    @classmethod
    def read(cls, path: str | Path) -> ShardRun:
        path = Path(path)
        if not (path / PLAN).is_file():
            what = "does not exist" if not path.exists() else f"holds no {PLAN}, so it is no run folder of `sgvla eval`"
            raise MergeError(f"{path} {what}; give the run folders of the shards (sgvla eval ... shard=i/N --out DIR)")
        try:
            cfg = from_mapping(EvalConfig, upgrade_stored(load_yaml(path / PLAN)), str(path / PLAN))
            client = load_yaml(path / VLM_CLIENT) if (path / VLM_CLIENT).is_file() else None
            results, infra = open_records(path, writable=False)  # never changes a shard's records
        except (ConfigError, CorruptRecords) as e:
            raise MergeError(str(e)) from None
        except OSError as e:
            raise MergeError(f"cannot read the run in {path}: {e}") from None
        return cls(path, cfg, client, results, infra)

    @property
    def shard(self) -> tuple[int, int]:
        return self.cfg.shard_index_count


@dataclass
class Merged:
    """The shards as one run of the whole plan."""

    cfg: EvalConfig  # the whole plan (shard 0/1)
    client: dict | None
    records: list[dict]  # one per episode, in plan order
    infra: list[dict]  # every failed attempt of the episodes that have no result, from all folders
    missing: list[str]  # one line per episode without a result (with --allow-missing): which, its shard, its folder
    missing_keys: list[EpisodeKey] = field(default_factory=list)  # those episodes
    planned: int = 0  # the whole plan's episodes


def listed(lines: list[str]) -> str:
    """The first SHOWN lines, indented, and how many more."""
    more = f"\n  ... and {len(lines) - SHOWN} more" if len(lines) > SHOWN else ""
    return "\n  " + "\n  ".join(lines[:SHOWN]) + more


def _check_one_plan(shards: list[ShardRun]) -> None:
    first, diffs = shards[0], []
    for other in shards[1:]:
        found = plan_differences(stored_settings(first.cfg), stored_settings(other.cfg), HARMLESS | {"shard"})
        if first.client is not None and other.client is not None:
            found += plan_differences(first.client, other.client, HARMLESS_CLIENT, prefix="vlm_client.")
        if other.shard[1] != first.shard[1]:
            found.append(f"shard: {first.cfg.shard} -> {other.cfg.shard} (a different number of shards)")
        diffs += [f"{first.path} -> {other.path}: {d}" for d in found]
    if diffs:
        raise MergeError("the folders hold runs of different plans; merging them would mix two plans in one table. "
                         "Differences:" + listed(diffs) + "\nMerge the shards of one plan: the same plan run with "
                         "shard=0/N .. N-1/N, each into its own folder.")


def _check_each_shard_once(shards: list[ShardRun], allow_missing: bool) -> None:
    count = shards[0].shard[1]
    folders: dict[int, list[str]] = {}
    for s in shards:
        folders.setdefault(s.shard[0], []).append(str(s.path))
    twice = [f"shard {i}/{count}: {', '.join(paths)}" for i, paths in sorted(folders.items()) if len(paths) > 1]
    if twice:
        raise MergeError("a shard is given more than once; give each shard's folder once:" + listed(twice))
    absent = [f"{i}/{count}" for i in range(count) if i not in folders]
    if absent and not allow_missing:
        raise MergeError(f"the plan has {count} shards; not given: {', '.join(absent)}. Give every shard's folder (a "
                         "shard that never ran: run its command, sgvla eval ... shard=i/N --out DIR), or pass "
                         "--allow-missing to merge what is there.")


def merge_shards(paths: Sequence[str | Path], allow_missing: bool = False) -> Merged:
    """The run folders of the shards of one plan as one run, or a `MergeError` saying why not (see the module
    docstring). `allow_missing`: episodes (and shards) without a result are left out and listed, not refused."""

    if not paths:
        raise MergeError("no shard folder given")
    shards = [ShardRun.read(p) for p in paths]
    _check_one_plan(shards)
    _check_each_shard_once(shards, allow_missing)
    count = shards[0].shard[1]
    whole = plan(shards[0].cfg, all_shards=True)
    home = shard_index(whole, count)
    found: dict[EpisodeKey, list[tuple[ShardRun, dict]]] = {}  # every record of every folder, by episode
    for s in shards:
        for record in s.results.records():
            found.setdefault(EpisodeKey.of(record), []).append((s, record))
    twice = [f"{tuple(key)}: in {' and '.join(str(s.path) for s, _ in copies)}"
             + (f" (an episode of shard {home[key]}/{count})" if key in home else "")
             for key, copies in found.items() if len(copies) > 1]
    if twice:
        raise MergeError(f"{len(twice)} episode(s) are recorded in more than one folder; each must be recorded once, "
                         "in the folder of its shard:" + listed(twice) + "\nDelete the copies from the folders of "
                         "other shards, then merge again.")
    stray = [f"{tuple(key)} in {s.path / RESULTS}: " + (
        "no episode of the plan" if key not in home
        else f"an episode of shard {home[key]}/{count}, not of the folder's shard {s.cfg.shard}")
        for key, [(s, _)] in found.items() if home.get(key) != s.shard[0]]
    if stray:
        raise MergeError(f"{len(stray)} record(s) belong to no episode of the folder's part of the plan:"
                         + listed(stray) + "\nThose folders hold records of another plan or shard; merge only the "
                         "folders of one plan's shards, or delete those lines.")
    failed = {EpisodeKey.of(r): s.path for s in shards for r in s.infra.records()}
    folder = {s.shard[0]: s.path for s in shards}
    missing = [key for key in whole if key not in found]
    lines = [f"{tuple(key)}: shard {home[key]}/{count} ({folder.get(home[key], 'folder not given')}"
             + (f"; failed on infrastructure, see {failed[key] / INFRA_FAILURES}" if key in failed else "") + ")"
             for key in missing]
    if missing and not allow_missing:
        raise MergeError(f"{len(missing)} of the plan's {len(whole)} episodes are recorded in no folder:"
                         + listed(lines) + "\nRerunning a shard's command (sgvla eval with the same plan, its "
                         "shard=i/N and --out) resumes it: it runs only that shard's missing episodes. Then merge "
                         "again, or pass --allow-missing to merge what is there.")
    unresolved = set(missing)  # plan episodes without a result: their failed attempts stay outstanding
    infra = [r for s in shards for r in s.infra.records() if EpisodeKey.of(r) in unresolved]
    records = [found[key][0][1] for key in whole if key in found]  # in plan order
    return Merged(dataclasses.replace(shards[0].cfg, shard=WHOLE), shards[0].client, records, infra, lines, missing,
                  len(whole))


def check_out(out: str | Path) -> None:
    """Refuse (without touching it) an output folder that exists and is not empty."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        what = "is a file" if not out.is_dir() else "is not empty"
        raise MergeError(f"{out} {what}; merge into a new or empty folder (nothing was changed)")


def _write_atomically(path: Path, text: str) -> None:
    """Whole or not at all: a killed merge leaves no half file (at most a hidden .tmp)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _jsonl(records: Iterable[dict]) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)  # as `results.JsonlFile` writes them


def write_merged(out: str | Path, merged: Merged) -> dict[str, Path]:
    """The merged run in `out` (new or empty: `check_out`): its records, outstanding infrastructure failures and
    plan, with `output_dir` set to `out`. Returns the files' paths by name."""
    out = Path(out)
    check_out(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = dataclasses.replace(merged.cfg, output_dir=str(out))
    files = {RESULTS: _jsonl(merged.records), INFRA_FAILURES: _jsonl(merged.infra)}
    if merged.missing_keys:
        files[MISSING] = _jsonl({"planned": merged.planned, **key._asdict()} for key in merged.missing_keys)
    if merged.client is not None:
        files[VLM_CLIENT] = yaml.safe_dump(merged.client, sort_keys=False)
    files[PLAN] = yaml.safe_dump(stored_settings(cfg), sort_keys=False)  # last: a folder with a plan is complete
    for name, text in files.items():
        _write_atomically(out / name, text)
    return {name: out / name for name in files}


def partial_merge(run_dir: str | Path, records: Iterable[dict]) -> str:
    """The partial-run line (`report.partial_note`) of a folder merged with --allow-missing, counting the episodes of
    its ``missing.jsonl`` that still have no record; "" for any other folder, or once each has one."""
    from sgvla.eval.report import partial_note

    path = Path(run_dir) / MISSING
    if not path.is_file():
        return ""
    try:
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        raise MergeError(f"{path}: cannot read the merge's missing episodes ({e}); merge the shards again") from None
    recorded = {EpisodeKey.of(r) for r in records}
    missing = [EpisodeKey.of(line) for line in lines if EpisodeKey.of(line) not in recorded]
    if not missing:
        return ""
    return partial_note(len(missing), int(lines[0]["planned"]), f"merged with --allow-missing; {MISSING} lists them")
