"""Perturbation sets as YAML files, read and checked the same way for every embodiment.

A set is a mapping with a name, a description, embodiment-specific keys and ``tasks`` (task id -> that task's
perturbation). What a task's entry means belongs to the embodiment (LIBERO moves objects after its reset, the
SO101 twin changes a layout before building its scene); finding the file, parsing it, and refusing unknown keys
and task ids, each error naming the file and where in it, is here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

Fail = Callable[[str, str], "PerturbationError"]  # (where in the file, what is wrong) -> the error to raise


class PerturbationError(ValueError):
    """A perturbation file or operation that would break its task."""


def read_set(name_or_path: str | Path, directory: Path, available: Sequence[str], what: str = "perturbation set"
             ) -> tuple[Any, Path]:
    """The parsed YAML of ``directory/<name>.yaml`` or of an explicit ``.yaml`` path, and that path."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = directory / f"{name_or_path}.yaml"
        if not path.is_file():
            raise FileNotFoundError(f"unknown {what} {str(name_or_path)!r}; available: {list(available)}")
    if not path.is_file():
        raise FileNotFoundError(f"perturbation file not found: {path}")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")), path
    except yaml.YAMLError as exc:
        raise PerturbationError(f"{path}: not valid YAML: {exc}") from exc


@dataclass(frozen=True)
class SetFile:
    """A set's top-level mapping with its keys and task ids checked; ``tasks``: task id -> its raw entry."""

    data: dict
    tasks: dict[int, Any]
    source: str

    def fail(self, where: str, msg: str) -> PerturbationError:
        return PerturbationError(f"{self.source}: {where}: {msg}")

    def task_fail(self, task_id: int) -> Fail:
        """The error maker of one task's keys: ``<file>: task <id>: key '<key>': <msg>``."""
        return lambda key, msg: self.fail(f"task {task_id}: key {key!r}", msg)

    def name(self, default: str) -> str:
        return str(self.data.get("name", default))

    @property
    def description(self) -> str:
        return str(self.data.get("description", ""))


def parse_set(data: Any, set_keys: Collection[str], task_ids: Collection[int], source: str) -> SetFile:
    """Check a set's top level (a mapping of ``set_keys``) and its task ids (within ``task_ids``)."""
    checked = SetFile({}, {}, source)
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise checked.fail("top level", "must be a mapping")
    unknown = sorted(set(data) - set(set_keys))
    if unknown:
        raise checked.fail(f"key {unknown[0]!r}", f"unknown key; allowed: {sorted(set_keys)}")
    tasks = data.get("tasks") or {}
    if not isinstance(tasks, dict):
        raise checked.fail("key 'tasks'", "must map task ids to perturbations")
    for raw_id in tasks:
        if not isinstance(raw_id, int) or isinstance(raw_id, bool) or raw_id not in task_ids:
            raise checked.fail(f"task {raw_id!r}", f"unknown task id; valid ids are {sorted(task_ids)}")
    return SetFile(data, dict(tasks), source)


def check_task_keys(entry: Any, task_keys: Collection[str], fail: Fail) -> dict:
    """One task's entry: a mapping of ``task_keys`` only."""
    if not isinstance(entry, dict):
        raise fail("task", "must be a mapping of perturbation keys")
    unknown = sorted(set(entry) - set(task_keys))
    if unknown:
        raise fail(unknown[0], f"unknown key; allowed: {sorted(task_keys)}")
    return entry
