"""rosbag2 recordings in MCAP with the `rosbags` package: no ROS install needed to write or read them.

Messages arrive already serialized (CDR, as rclpy's raw subscriptions deliver them) and are written as
they are; the MCAP schemas are the message definitions (ROS 2 Kilted's standard types and this
repository's sgvla_interfaces), so Foxglove and `ros2 bag` read the files without the package installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from sgvla.paths import interface_dir

INTERFACES = interface_dir()


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

    def __init__(self, path: str | Path):
        from rosbags.rosbag2 import StoragePlugin, Writer

        self.path = Path(path)
        if self.path.exists():
            raise FileExistsError(f"{self.path} exists; rosbag2 writes a new folder")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._connections: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    def add_topic(self, topic: str, msgtype: str) -> None:
        if topic not in self._connections:
            self._connections[topic] = self._writer.add_connection(topic, msgtype, typestore=typestore())
            self.counts[topic] = 0

    def knows(self, msgtype: str) -> bool:
        return msgtype in typestore().fielddefs

    def write(self, topic: str, timestamp_ns: int, data: bytes) -> None:
        self._writer.write(self._connections[topic], int(timestamp_ns), data)
        self.counts[topic] += 1

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    @property
    def mcap_files(self) -> list[Path]:
        return sorted(self.path.glob("*.mcap"))


def read_bag(path: str | Path, topics: list[str] | None = None) -> Iterator[tuple[str, int, Any]]:
    """(topic, timestamp ns, deserialized message) of a rosbag2 folder, in log-time order."""
    from rosbags.rosbag2 import Reader

    store = typestore()
    with Reader(Path(path)) as reader:
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        for conn, timestamp, raw in reader.messages(connections=conns):
            yield conn.topic, timestamp, store.deserialize_cdr(raw, conn.msgtype)
