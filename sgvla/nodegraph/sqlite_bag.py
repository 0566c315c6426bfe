"""A rosbag2 sqlite3 file (.db3) read without its metadata.yaml: what its writer had committed when it was caught
mid-write (still recording, killed, or the machine lost power).

rosbag2 writes messages in transactions. A copy of the file and its journal (`-journal`, or `-wal` in WAL mode) is
opened, never the recording itself: SQLite rolls an interrupted transaction back (its messages are lost: they were
never committed) or replays the committed ones of a WAL, and that must not change the recording.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"SQLite format 3\x00"
JOURNALS = ("-journal", "-wal")


@dataclass
class SqliteEnd:
    """What was committed, and what was pending beside it."""

    size: int  # bytes of the .db3
    messages: int = 0
    first_ns: int | None = None  # receive times of the messages read
    last_ns: int | None = None
    journal: str = ""  # "-journal 12288 bytes" when the writer left one: an interrupted transaction, rolled back
    closed: bool = False  # the writer's closing metadata is in the file (rosbag2 schema 3 and later)
    why: str = ""  # why reading stopped early (a damaged database), else ""


def is_sqlite(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(len(MAGIC)) == MAGIC


class SqliteBag:
    """`topics()` and `messages()` of the committed part of a .db3."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.end = SqliteEnd(self.path.stat().st_size)
        self._copy: tempfile.TemporaryDirectory | None = None  # of the file and its journal, made once

    @contextmanager
    def _connection(self):
        journals = [Path(f"{self.path}{j}") for j in JOURNALS if Path(f"{self.path}{j}").exists()]
        self.end.journal = ", ".join(f"{j.name} ({j.stat().st_size} bytes)" for j in journals)
        path = self.path
        if journals or self._copy is not None:
            if self._copy is None:
                self._copy = tempfile.TemporaryDirectory(prefix="sgvla_db3_")
                for source in (self.path, *journals):
                    shutil.copyfile(source, Path(self._copy.name) / source.name)
            path = Path(self._copy.name) / self.path.name
        conn = sqlite3.connect(f"file:{path}?mode={'ro' if path == self.path else 'rw'}", uri=True)
        try:
            yield conn
        finally:
            conn.close()

    def topics(self) -> dict[str, str]:
        """topic -> type; counts the messages into `end`."""
        self.end = SqliteEnd(self.path.stat().st_size)
        try:
            with self._connection() as conn:
                topics = {name: msgtype for name, msgtype in conn.execute("SELECT name, type FROM topics")}
                count, first, last = conn.execute("SELECT count(*), min(timestamp), max(timestamp) FROM messages"
                                                  ).fetchone()
                self.end.messages, self.end.first_ns, self.end.last_ns = count, first, last
                self.end.closed = _closed(conn)
                return topics
        except sqlite3.DatabaseError as e:
            raise ValueError(f"{self.path}: not a rosbag2 sqlite3 file with its topics and messages ({e})") from None

    def messages(self, topics: set[str] | None = None) -> Iterator[tuple[str, str, int, bytes]]:
        """(topic, type, receive time ns, CDR bytes) in the order they were written, up to a damaged page."""
        self.end = SqliteEnd(self.path.stat().st_size)
        end = self.end
        with self._connection() as conn:
            end.closed = _closed(conn)
            by_id = {i: (name, msgtype) for i, name, msgtype in conn.execute("SELECT id, name, type FROM topics")}
            try:
                for topic_id, timestamp, data in conn.execute(
                        "SELECT topic_id, timestamp, data FROM messages ORDER BY id"):
                    end.messages += 1
                    end.first_ns = timestamp if end.first_ns is None else min(end.first_ns, timestamp)
                    end.last_ns = timestamp if end.last_ns is None else max(end.last_ns, timestamp)
                    topic, msgtype = by_id.get(topic_id, ("", ""))
                    if topic and (topics is None or topic in topics):
                        yield topic, msgtype, timestamp, bytes(data)
            except sqlite3.DatabaseError as e:  # a page the machine never wrote: the messages before it stand
                end.why = f"the database is damaged after {end.messages} message(s) ({e})"


def _closed(conn) -> bool:
    try:
        return conn.execute("SELECT count(*) FROM metadata").fetchone()[0] > 0
    except sqlite3.DatabaseError:  # no metadata table (rosbag2 before schema 3): nothing says it was finished
        return False
