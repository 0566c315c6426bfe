"""rosbag2 recordings in MCAP with the `rosbags` package: no ROS install needed to write or read them.

Messages arrive already serialized (CDR, as rclpy's raw subscriptions deliver them) and are written as
they are; the MCAP schemas are the message definitions (ROS 2 Kilted's standard types and this
repository's sgvla_interfaces), so Foxglove and `ros2 bag` read the files without the package installed.

A recording is read (`open_bag`) with rosbags' indexed reader when it was closed (metadata.yaml beside storage
files that end as they should); one cut short (a killed recorder, a power loss) or without metadata.yaml is read by
streaming its storage files from their start (`sgvla.nodegraph.mcap_stream`, `sgvla.nodegraph.sqlite_bag`), every
complete message, and says where it ends and what was lost (`Bag.ending`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from sgvla.paths import interface_dir

INTERFACES = interface_dir()
CHUNK_S = 1.0  # the recorder writes what it holds at least this often: a killed one loses about this much


@cache
def typestore():
    """Kilted's types plus sgvla_interfaces' messages, read from their .msg files."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    types: dict[str, Any] = {}
    for path in sorted((INTERFACES / "msg").glob("*.msg")):
        types.update(get_types_from_msg(path.read_text(), f"sgvla_interfaces/msg/{path.stem}"))
    store.register(types)
    return store


class BagWriter:
    """A rosbag2 folder with one MCAP file; topics are added as they are first seen."""

    def __init__(self, path: str | Path, chunk_s: float = CHUNK_S):
        from rosbags.rosbag2 import StoragePlugin, Writer

        self.path = Path(path)
        if self.path.exists():
            raise FileExistsError(f"{self.path} exists; rosbag2 writes a new folder")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._writer.storage.bio.flush()  # the magic and header: a file killed before its first chunk is still MCAP
        self._connections: dict[str, Any] = {}
        self.counts: dict[str, int] = {}
        self.chunk_s = chunk_s
        self._chunk_start_ns: int | None = None

    def add_topic(self, topic: str, msgtype: str) -> None:
        if topic not in self._connections:
            self._connections[topic] = self._writer.add_connection(topic, msgtype, typestore=typestore())
            self.counts[topic] = 0

    def knows(self, msgtype: str) -> bool:
        return msgtype in typestore().fielddefs

    def write(self, topic: str, timestamp_ns: int, data: bytes) -> None:
        self._writer.write(self._connections[topic], int(timestamp_ns), data)
        self.counts[topic] += 1
        self._chunk_start_ns = timestamp_ns if self._chunk_start_ns is None else self._chunk_start_ns
        if timestamp_ns - self._chunk_start_ns >= self.chunk_s * 1e9:
            self.flush()

    def flush(self) -> None:
        """Into the file what the writer holds: rosbags keeps a chunk in memory until it has 1 MiB (seconds of a
        low-rate recording), all lost when the recorder is killed; a chunk of `chunk_s` of messages at most is.
        (rosbags==0.11.9's MCAP storage: its pending chunk and `close_chunk`.)"""
        storage = self._writer.storage
        if storage.chunk.bio.tell():
            storage.close_chunk()
            storage.bio.flush()
        self._chunk_start_ns = None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    @property
    def mcap_files(self) -> list[Path]:
        return sorted(self.path.glob("*.mcap"))


class BagError(ValueError):
    """A bag that cannot be read, or that does not fit what it is read for (a contract's topics and types)."""


@dataclass
class StorageEnd:
    """Where one storage file of a bag read as a stream ends, and what was lost."""

    file: str
    size: int  # bytes
    complete_bytes: int  # up to the end of the last complete record (MCAP), the whole file (sqlite3)
    messages: int  # complete ones
    first_ns: int | None
    last_ns: int | None  # the last complete message's receive time
    closed: bool  # its writer finished it: nothing was lost
    lost: str  # what was lost, in words ("" when closed)
    storage: str = "mcap"  # or sqlite3 (whose messages are rows, not byte ranges)

    def describe(self) -> str:
        if not self.messages:
            where = "no complete message"
        else:
            last = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.last_ns / 1e9))
            where = (f"{self.messages} complete message(s), the last received {last}.{self.last_ns % 10**9 // 10**6:03d}"
                     f" UTC ({(self.last_ns - self.first_ns) / 1e9:.1f} s after the first)")
        if self.closed:
            return f"{self.file}: {where}; the file was closed (complete)"
        if self.storage == "mcap":
            where += f", in bytes 0-{self.complete_bytes} of {self.size}"
        return f"{self.file}: {where}; lost: {self.lost}"


@dataclass
class Bag:
    """A recording to read: `topics` (topic -> type) and `messages()`. `ends`: its storage files as streamed
    (empty when read closed, by rosbags' indexed reader); `notes`: why it was streamed."""

    path: Path
    topics: dict[str, str]
    _read: Any
    ends: list[StorageEnd] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def messages(self, topics: set[str] | None = None) -> Iterator[tuple[str, str, int, bytes]]:
        """(topic, type, receive time ns, CDR bytes) of the complete messages on `topics` (all: None)."""
        return self._read(topics)

    @property
    def cut(self) -> bool:
        """Some of it was lost: a storage file that its writer did not finish."""
        return any(not e.closed for e in self.ends)

    @property
    def complete_messages(self) -> int:
        return sum(e.messages for e in self.ends)

    def ending(self) -> list[str]:
        """Where the bag ends and what was lost, a line each (none when it was read closed)."""
        return [*self.notes, *(e.describe() for e in self.ends)]


def _split_index(path: Path) -> tuple[int, str]:
    match = re.search(r"_(\d+)$", path.stem)
    return (int(match.group(1)) if match else 0, path.name)


def open_bag(path: str | Path) -> Bag:
    """A rosbag2 folder (or one of its storage files, or a lone .mcap/.db3 file), read closed by rosbags when it can
    be, else streamed. Raises FileNotFoundError, or BagError (one line) for what is no bag."""
    from rosbags.rosbag2 import Reader

    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such bag (a rosbag2 folder, or its .mcap/.db3 file)")
    folder = path if path.is_dir() else path.parent
    notes = []
    if (folder / "metadata.yaml").exists() and (path.is_dir() or path.suffix in (".mcap", ".db3")):
        try:
            with Reader(folder) as reader:
                topics = {c.topic: c.msgtype for c in reader.connections}
            return Bag(folder, topics, lambda wanted: _indexed(folder, wanted))
        except Exception as e:  # noqa: BLE001 - rosbags' errors (ReaderError, a bad metadata.yaml, ...): stream it
            notes.append(f"{folder}: rosbags cannot read it as closed ({type(e).__name__}: {e}); read as a stream")
    elif path.is_dir():
        notes.append(f"{folder}: no metadata.yaml (the recorder did not finish); its storage files read as a stream, "
                     "as `ros2 bag reindex` reads them")
    files = ([path] if path.is_file() else
             sorted((p for p in folder.iterdir() if p.suffix in (".mcap", ".db3") and p.is_file()), key=_split_index))
    if not files:
        raise BagError(f"{path}: not a rosbag2 bag (no metadata.yaml, no .mcap or .db3 file in it)")
    streams = [_stream(f) for f in files]
    topics: dict[str, str] = {}
    ends = []
    for stream in streams:
        try:
            topics.update(stream.topics())
        except ValueError as e:  # a sqlite3 file without rosbag2's tables
            raise BagError(str(e)) from None
        ends.append(_end(stream))

    def read(wanted: set[str] | None) -> Iterator[tuple[str, str, int, bytes]]:
        for stream in streams:
            yield from _stream_messages(stream, wanted)
            ends[streams.index(stream)] = _end(stream)

    return Bag(folder if path.is_dir() else path, topics, read, ends, notes)


def _indexed(folder: Path, wanted: set[str] | None) -> Iterator[tuple[str, str, int, bytes]]:
    from rosbags.rosbag2 import Reader

    with Reader(folder) as reader:
        conns = [c for c in reader.connections if wanted is None or c.topic in wanted]
        for conn, timestamp, raw in reader.messages(connections=conns):
            yield conn.topic, conn.msgtype, timestamp, raw


def _stream(path: Path):
    from sgvla.nodegraph.mcap_stream import McapStream, NotMcap
    from sgvla.nodegraph.sqlite_bag import SqliteBag, is_sqlite

    try:
        if is_sqlite(path):
            return SqliteBag(path)
        return McapStream(path)
    except NotMcap as e:
        what = str(e)
        if "is no MCAP file" in what:
            what = f"{path} is not a rosbag2 bag (neither MCAP nor sqlite3: it begins with {path.read_bytes()[:8]!r})"
        raise BagError(what) from None


def _stream_messages(stream, wanted: set[str] | None) -> Iterator[tuple[str, str, int, bytes]]:
    from sgvla.nodegraph.mcap_stream import McapStream

    if isinstance(stream, McapStream):
        for channel, log_ns, data in stream.messages(wanted):
            yield channel.topic, channel.msgtype, log_ns, data
    else:
        yield from stream.messages(wanted)


def _end(stream) -> StorageEnd:
    from sgvla.nodegraph.mcap_stream import McapStream

    e = stream.end
    if isinstance(stream, McapStream):
        lost = f"{e.lost_bytes} byte(s) after the last complete record: {e.why}" if e.lost_bytes else e.why
        if e.data_end and not e.closed:
            lost = f"none of the messages (the data section ended); the summary: {lost}"
        return StorageEnd(stream.path.name, e.size, e.complete_bytes, e.messages, e.first_ns, e.last_ns, e.closed,
                          lost)
    journal = ""
    if "-journal" in e.journal:
        journal = f"the transaction it was writing ({e.journal}) was never committed: rolled back"
    elif e.journal:
        journal = (f"its write-ahead log ({e.journal}) replayed: the transactions it had committed are read, one it "
                   "had not is lost")
    lost = "; ".join(x for x in (journal, e.why, "" if e.closed else
                                 "no closing metadata in the file: the writer did not finish") if x)
    return StorageEnd(stream.path.name, e.size, e.size, e.messages, e.first_ns, e.last_ns, e.closed, lost, "sqlite3")


def read_bag(path: str | Path, topics: list[str] | None = None) -> Iterator[tuple[str, int, Any]]:
    """(topic, timestamp ns, deserialized message) of a rosbag2 folder, in log-time order (a streamed one: in the
    order its messages were written)."""
    store = typestore()
    for topic, msgtype, timestamp, raw in open_bag(path).messages(None if topics is None else set(topics)):
        yield topic, timestamp, store.deserialize_cdr(raw, msgtype)
