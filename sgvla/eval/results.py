"""Episode results as JSONL: one record per finished episode, appended and flushed at once.

Two files per run folder:

- ``episodes.jsonl`` holds results, one per episode, each recorded exactly once: success, or a
  policy failure (``failure_reason``). Rerunning the same plan skips the episodes recorded here.
- ``infra_failures.jsonl`` holds every attempt whose infrastructure failed (graph source, simulator,
  worker process), with the reason. Such an attempt is no result: it is kept out of ``episodes.jsonl``
  and out of success rates, and the next run of the plan retries the episode. An episode is
  outstanding while it has infrastructure failures and no result.

A crashed or killed run loses at most the episode in flight. A partial last line (the process died
mid-write) is cut off when a run opens the file; a malformed line anywhere else is refused with
file:line and nothing is changed.
"""

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

from sgvla.core.episode import EpisodeKey

log = logging.getLogger(__name__)
RESULTS = "episodes.jsonl"
INFRA_FAILURES = "infra_failures.jsonl"


class CorruptRecords(ValueError):
    """A line of a records file that is not a record; the message says where and how to fix it."""


class RunFolderGone(RuntimeError):
    """The run folder disappeared while the run was writing into it (deleted, or its disk unmounted)."""


class JsonlFile:
    """Append-only JSONL of episode records (each holds the `EpisodeKey` fields); fsynced per line.

    ``writable=False`` (reports) never changes the file: a partial last line is skipped, not cut off.
    """

    def __init__(self, path: Path, writable: bool = True):
        self.path = Path(path)
        self.writable = writable
        self._records = self._read()

    def _read(self) -> list[dict]:
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" when the file ends with a newline
        records = [self._parse(number, line) for number, line in enumerate(lines, 1) if line.strip()]
        if tail.strip():
            try:  # a complete record whose newline was not written yet is kept
                records.append(self._parse(len(lines) + 1, tail))
                if self.writable:
                    with self.path.open("ab") as f:
                        f.write(b"\n")
            except CorruptRecords:
                log.warning("%s: %s a partial last record (%d bytes) left by an interrupted run", self.path,
                            "dropping" if self.writable else "ignoring", len(tail))
                if self.writable:
                    with self.path.open("r+b") as f:
                        f.truncate(len(data) - len(tail))
        return records

    def _parse(self, number: int, line: bytes) -> dict:
        try:
            record = json.loads(line)
            EpisodeKey.of(record)
        except (ValueError, KeyError, TypeError) as e:
            problem = f"a record without {e}" if isinstance(e, KeyError) else f"not a JSON episode record ({e})"
            text = line.decode("utf-8", "replace")
            raise CorruptRecords(
                f"{self.path}:{number}: {problem}: {text[:80]!r}{'...' if len(text) > 80 else ''}. Nothing was "
                f"changed. Repair that line, or delete it (its episode is then run again by the next `sgvla eval` "
                f"of this plan), and run the command again.") from None
        return record

    def records(self) -> Iterator[dict]:
        return iter(list(self._records))

    def _write(self, record: dict) -> None:
        if not self.writable:
            raise PermissionError(f"{self.path} was opened read-only")
        try:
            f = self.path.open("a", encoding="utf-8")
        except FileNotFoundError:
            if self.path.parent.is_dir():
                raise
            # Not recreated: a folder made anew would hold records without the plan, lock and settings they
            # belong to. The run stops here, saying so; the records written before are where they were.
            raise RunFolderGone(
                f"the run folder {self.path.parent} was removed while the run was writing into it: episode "
                f"{tuple(EpisodeKey.of(record))} finished but could not be recorded. Nothing was written elsewhere; "
                "restore the folder to continue that run, or run the command again to start the plan afresh"
            ) from None
        with f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._records.append(record)


class ResultsFile(JsonlFile):
    """``episodes.jsonl``: at most one result per episode key."""

    def __init__(self, path: Path, writable: bool = True):
        super().__init__(path, writable)
        self.keys: set[EpisodeKey] = set()
        for number, record in enumerate(self._records, 1):
            key = EpisodeKey.of(record)
            if key in self.keys:
                raise CorruptRecords(f"{self.path}: episode {tuple(key)} is recorded twice (record {number}); "
                                     "nothing was changed: delete one of the two lines and run the command again")
            self.keys.add(key)

    def __contains__(self, key: EpisodeKey) -> bool:
        return key in self.keys

    def append(self, record: dict) -> None:
        key = EpisodeKey.of(record)
        if key in self.keys:
            raise ValueError(f"episode already recorded in {self.path}: {key}")
        self._write(record)
        self.keys.add(key)


class InfraFailures(JsonlFile):
    """``infra_failures.jsonl``: every attempt whose infrastructure failed, with kind and reason."""

    def add(self, key: EpisodeKey, kind: str, reason: str, **extra) -> dict:
        """Record a failed attempt of episode `key`: `kind` (graph_source, worker_lost, error, node_graph) and
        the reason in words."""
        record = {**key._asdict(), "kind": kind, "reason": reason, "attempt": self.attempts(key) + 1,
                  "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **extra}
        self._write(record)
        return record

    def attempts(self, key: EpisodeKey) -> int:
        return sum(EpisodeKey.of(r) == key for r in self._records)

    def outstanding(self, results: ResultsFile) -> dict[EpisodeKey, dict]:
        """The last failed attempt of every episode that has no result yet."""
        last = {EpisodeKey.of(r): r for r in self._records}
        return {k: r for k, r in last.items() if k not in results}


def open_records(run_dir: Path, writable: bool = True) -> tuple[ResultsFile, InfraFailures]:
    run_dir = Path(run_dir)
    return ResultsFile(run_dir / RESULTS, writable), InfraFailures(run_dir / INFRA_FAILURES, writable)
