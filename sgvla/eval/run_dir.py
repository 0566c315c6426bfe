"""A run folder belongs to one plan and to one run at a time.

`RunDir.open` is how `sgvla eval` (and the evaluator node) take a folder:

1. It locks ``.lock`` in the folder with ``fcntl.flock``; a second run into the same folder is refused
   with the holder's pid. The OS releases the lock when the holder dies, however it dies.
2. It compares the plan stored in the folder (``config.yaml``, and ``vlm_client.yaml`` for VLM graphs)
   with the new one in every setting that can change an outcome or the table, and refuses with each
   difference (old -> new): resuming must not mix two plans in one table. Settings in `HARMLESS` may
   differ. ``new_run=True`` starts a new run in the folder instead, whatever its plan: the previous
   run's files move to ``superseded/<time>/`` (nothing is deleted).
3. It writes the plan and opens the records (`sgvla.eval.results`).

Problems are `RunDirError`s whose message names the folder and what to do.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sgvla.core.config import to_mapping
from sgvla.eval.config import EvalConfig
from sgvla.eval.results import INFRA_FAILURES, RESULTS, InfraFailures, ResultsFile, open_records

LOCK = ".lock"
PLAN = "config.yaml"
VLM_CLIENT = "vlm_client.yaml"
SUPERSEDED = "superseded"
# Plan settings that change neither an outcome nor the table (images are rendered whenever something reads
# them, so rendering more of them, or videos, changes nothing).
# Where and how episodes run changes no outcome either: a served policy's batched forward pass agrees with its
# batch-of-one pass within float rounding, and every episode draws its noise from its own seed.
HARMLESS = frozenset({"name", "workers", "output_dir", "on_infra_failure", "video", "render_images", "executor",
                      "policy_server", "ray"})
# Client settings that only change how a VLM is reached, not what it answers.
HARMLESS_CLIENT = frozenset({"concurrency", "timeout_s", "max_retries", "backoff_s", "api_key_env"})
# Files of a run that a new run moves aside.
RUN_FILES = (PLAN, VLM_CLIENT, RESULTS, INFRA_FAILURES, "missing.jsonl", "table.md", "table.csv", "comparisons.csv",
             "failures.csv", "families.csv", "family_comparisons.csv", "success.png", "progress.png", "report.html",
             "videos")


class RunDirError(ValueError):
    pass


def stored_settings(cfg: EvalConfig) -> dict[str, Any]:
    """The plan as plain data, registered choices with their `type` (what `config.yaml` holds)."""
    return to_mapping(cfg)


def client_settings(cfg: EvalConfig) -> dict[str, Any] | None:
    """What the graph source resolves apart from the plan (a VLM client, whose file can change), or None."""
    return cfg.graph_source.stored_settings()


def _show(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


# Settings a check fills in when the plan runs (the weights' provenance): a plan stored before they existed lacks
# them, and its records say no more, so their absence there is no difference.
FILLED_IN = frozenset({"weights_sha256", "weights_revision"})


def _choice_defaults(key: str, choice: dict) -> dict[str, Any]:
    """The option defaults of the registered choice `choice` (a mapping with `type`) of the plan's field `key`."""
    import dataclasses
    import typing

    from sgvla.core.registry import Choice

    kind = typing.get_type_hints(EvalConfig).get(key)
    kind = next(iter(typing.get_args(kind)), kind)  # list[PolicyConfig] -> PolicyConfig
    try:
        cls = kind.choice(choice["type"]) if isinstance(kind, type) and issubclass(kind, Choice) else None
    except (ValueError, KeyError):
        cls = None
    if cls is None:
        return {}
    return {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}


def plan_differences(old: dict[str, Any], new: dict[str, Any], harmless: frozenset[str],
                     defaults: dict[str, Any] | None = None, prefix: str = "") -> list[str]:
    """``key: old -> new`` for every setting outside `harmless` that differs; a key the old plan lacks
    counts as its default (the plan was written before the setting existed), in a choice's options too (a policy
    entry stored before `tasks` existed is the same policy)."""
    defaults = defaults or {}
    missing = object()
    diffs = []
    for key in [*new, *(k for k in old if k not in new)]:
        if key in harmless or (key in FILLED_IN and key not in old):
            continue
        before = old.get(key, defaults.get(key, missing))
        after = new.get(key, missing)
        same_choice = lambda a, b: isinstance(a, dict) and isinstance(b, dict) and a.get("type") == b.get("type")  # noqa: E731
        if same_choice(before, after):  # a choice's options
            diffs += plan_differences(before, after, frozenset(), _choice_defaults(key, after), f"{prefix}{key}.")
        elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after) and \
                all(same_choice(b, a) for b, a in zip(before, after)) and before:  # a list of choices: each one's
            for i, (b, a) in enumerate(zip(before, after)):
                diffs += plan_differences(b, a, frozenset(), _choice_defaults(key, a), f"{prefix}{key}[{i}].")
        elif before != after:
            show = lambda v: "(not set)" if v is missing else _show(v)  # noqa: E731
            diffs.append(f"{prefix}{key}: {show(before)} -> {show(after)}")
    return diffs


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise RunDirError(f"{path}: cannot read the stored plan ({e}); move the folder's run aside with "
                          "--new-run or use another output folder") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: the stored plan is not a mapping; move the run aside with --new-run")
    return data


@dataclass
class RunDir:
    path: Path
    results: ResultsFile
    infra: InfraFailures
    superseded: Path | None = None  # where new_run moved the previous run
    _lock: int | None = field(default=None, repr=False)

    @classmethod
    def open(cls, cfg: EvalConfig, new_run: bool = False) -> RunDir:
        path = Path(cfg.output_dir)
        lock = _lock(path)
        try:
            superseded = _check_plan(path, cfg, new_run)
            results, infra = open_records(path)
            _write_plan(path, cfg)
        except BaseException:
            os.close(lock)
            raise
        return cls(path, results, infra, superseded, lock)

    def close(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # releases the flock
            self._lock = None

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _lock(path: Path) -> int:
    if path.exists() and not path.is_dir():
        raise RunDirError(f"output folder {path} is a file, not a folder; choose a folder (--out DIR)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise RunDirError(f"cannot write to output folder {path}: {e.strerror}; choose a writable folder "
                          "(--out DIR)") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise RunDirError(f"output folder {path} is in use by another run (pid {holder}); wait for it to end, "
                          "or use another output folder (--out DIR)") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _check_plan(path: Path, cfg: EvalConfig, new_run: bool) -> Path | None:
    """Refuse a plan that differs from the folder's, or with `new_run` move the old run aside (returns where)."""
    present = [name for name in RUN_FILES if (path / name).exists()]
    stored = path / PLAN
    if not any((path / name).is_file() and (path / name).stat().st_size for name in (RESULTS, INFRA_FAILURES)):
        return None  # no record to mix with: the new plan simply replaces the stored one
    if new_run:
        return _supersede(path, present)
    diffs: list[str] = []
    if stored.is_file():
        defaults = stored_settings(EvalConfig())
        diffs = plan_differences(_read_yaml(stored), stored_settings(cfg), HARMLESS, defaults)
        old_client = _read_yaml(path / VLM_CLIENT) if (path / VLM_CLIENT).is_file() else None
        new_client = client_settings(cfg)
        if old_client is not None and new_client is not None:
            diffs += plan_differences(old_client, new_client, HARMLESS_CLIENT, prefix="vlm_client.")
    else:
        diffs = [f"{PLAN}: missing, so the plan of the records in this folder is unknown"]
    if not diffs:
        return None
    raise RunDirError(
        f"output folder {path} holds a run of another plan; resuming it would mix two plans in one table. "
        "Differences (stored -> new):\n  " + "\n  ".join(diffs) +
        "\nRun the stored plan again to resume it, use another output folder (--out DIR), or pass --new-run to "
        f"start a new run there (the old run's files move to {path / SUPERSEDED}/, nothing is deleted).")


def _supersede(path: Path, present: list[str]) -> Path:
    target = path / SUPERSEDED / time.strftime("%Y%m%d-%H%M%S")
    n = 1
    while target.exists():
        n += 1
        target = target.with_name(f"{target.name.split('.')[0]}.{n}")
    target.mkdir(parents=True)
    for name in present:
        os.rename(path / name, target / name)
    return target


def _write_plan(path: Path, cfg: EvalConfig) -> None:
    """config.yaml (a plan `sgvla eval --config` takes) and, for VLM graphs, the resolved client."""
    files = {PLAN: stored_settings(cfg)}
    client = client_settings(cfg)
    if client is not None:
        files[VLM_CLIENT] = client
    for name, data in files.items():
        tmp = path / f".{name}.tmp"
        tmp.write_text(yaml.safe_dump(data, sort_keys=False))
        os.replace(tmp, path / name)
