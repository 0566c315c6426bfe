"""Append-only JSONL of answers, keyed by frame: a rerun skips every frame already answered.

Lines are flushed as they are written, so a killed run loses at most the line being written
(a torn last line is ignored on reload). Answers that carry an error are kept for the record
but do not count as finished: the next run asks again.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)


class AnswerCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.records: dict[str, dict] = {}
        if self.path.is_file():
            self._load()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        torn_tail = self.path.is_file() and self.path.stat().st_size and not self.path.read_bytes().endswith(b"\n")
        self._file = self.path.open("a", encoding="utf-8")
        if torn_tail:
            self._file.write("\n")

    def _load(self) -> None:
        torn = 0
        with self.path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                    self.records[record["key"]] = record
                except (ValueError, KeyError, TypeError):
                    torn += 1
        if torn:
            log.warning("%s: ignored %d unreadable line(s)", self.path, torn)

    def finished(self, key: str) -> bool:
        record = self.records.get(key)
        return record is not None and not record.get("error")

    def add(self, record: dict) -> None:
        self.records[record["key"]] = record
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> AnswerCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
