"""Episode results as JSONL: one record per finished episode, appended and flushed at once.

A crashed or killed run loses at most the episode in flight. Rerunning the same plan reads the
file, skips episodes whose key is already recorded, and appends the rest, so every episode ends
up recorded exactly once. A partial last line (the process died mid-write) is cut off on open.
"""

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)


class EpisodeKey(NamedTuple):
    policy: str
    task_id: int
    perturbation: str
    mode: str
    seed: int

    @classmethod
    def of(cls, record: dict) -> "EpisodeKey":
        return cls(record["policy"], int(record["task_id"]), record["perturbation"], record["mode"],
                   int(record["seed"]))


class ResultsFile:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_tail()
        self.keys = {EpisodeKey.of(r) for r in self.records()}

    def _repair_tail(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            log.warning("%s: dropping a partial last record (%d bytes) left by an interrupted run",
                        self.path, len(data) - keep)
            with self.path.open("r+b") as f:
                f.truncate(keep)

    def records(self) -> Iterator[dict]:
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as e:
                        raise ValueError(f"{self.path}:{number}: not a JSON record ({e})") from None

    def __contains__(self, key: EpisodeKey) -> bool:
        return key in self.keys

    def append(self, record: dict) -> None:
        key = EpisodeKey.of(record)
        if key in self.keys:
            raise ValueError(f"episode already recorded in {self.path}: {key}")
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.keys.add(key)
