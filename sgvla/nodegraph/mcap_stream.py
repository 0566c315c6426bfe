"""An MCAP file read as a stream, record after record from its start: every complete message of a file that was cut
short (a killed recorder, a power loss), which has no summary, no footer and no closing magic for an indexed reader
(rosbags' stops with "File end magic is invalid").

The format: the magic, then records of opcode (1 byte), length (8 bytes, little-endian) and body. Schemas, channels
and messages come as records of their own or inside chunk records (compressed with zstd or lz4, or not at all, as
sgvla's recorder writes them). The stream stops at the first record that is incomplete or damaged; of a chunk cut
in the middle, the complete records at its start are read too (an uncompressed or zstd/lz4 chunk decodes from its
start). What follows is counted as lost, in bytes, and said in `StreamEnd.why`.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"\x89MCAP0\r\n"
HEADER, FOOTER, SCHEMA, CHANNEL, MESSAGE, CHUNK, DATA_END = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x0F
OPCODES = set(range(0x01, 0x10))  # 0x00 is reserved: zeros are a file's unwritten end (a power loss), no record
U16, U32, U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")
MESSAGE_HEAD = struct.Struct("<HIQQ")  # channel id, sequence, log time, publish time
CHUNK_HEAD = struct.Struct("<QQQI")  # message start and end time, uncompressed size, uncompressed crc


class NotMcap(ValueError):
    """The file does not begin with MCAP's magic."""


@dataclass(frozen=True)
class Channel:
    id: int
    topic: str
    msgtype: str  # the schema's name (pkg/msg/Name)
    encoding: str  # the messages' (cdr)
    schema_encoding: str  # ros2msg, ros2idl
    definition: str  # the schema's text: the message definitions


@dataclass
class StreamEnd:
    """How far the file was read and why it ended there."""

    size: int  # bytes in the file
    complete_bytes: int = 0  # where the last complete record ends
    closed: bool = False  # data, summary and footer written: the writer finished the file
    data_end: bool = False  # the data section's end record was read: no message is missing
    messages: int = 0
    first_ns: int | None = None  # log times of the messages read
    last_ns: int | None = None
    partial_messages: int = 0  # of those, read from a chunk cut short
    why: str = ""  # what the first incomplete or damaged record was (empty when the file is closed)

    @property
    def lost_bytes(self) -> int:
        return self.size - self.complete_bytes


class _Cut(Exception):
    """A record runs past the end of what is there."""


class _Reader:
    def __init__(self, data, offset: int = 0):
        self.data, self.pos = data, offset

    def take(self, n: int):
        if self.pos + n > len(self.data):
            raise _Cut
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u16(self) -> int:
        return U16.unpack(self.take(2))[0]

    def u32(self) -> int:
        return U32.unpack(self.take(4))[0]

    def u64(self) -> int:
        return U64.unpack(self.take(8))[0]

    def string(self) -> str:
        return bytes(self.take(self.u32())).decode()


def _decode_start(compression: str, data) -> bytes:
    """As much of a cut chunk's records as its start decodes to (zstd and lz4 decode as a stream)."""
    if compression == "":
        return bytes(data)
    if compression == "zstd":
        from rosbags.rosbag2.storage_mcap import zstd

        return zstd.ZstdDecompressor().decompress(bytes(data))
    if compression == "lz4":
        from lz4.frame import LZ4FrameDecompressor

        return LZ4FrameDecompressor().decompress(bytes(data))
    raise ValueError(f"chunk compression {compression!r} is not zstd or lz4")


class McapStream:
    """`messages()`: (channel, log time ns, CDR bytes) in the file's order, up to the first incomplete record;
    `end` then says where the file ended and what was lost."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        with self.path.open("rb") as f:
            head = f.read(len(MAGIC))
        if not head:
            raise NotMcap(f"{self.path} is empty")
        if head != MAGIC:
            raise NotMcap(f"{self.path} ends within MCAP's magic ({len(head)} bytes): nothing of it is complete"
                          if MAGIC.startswith(head) else
                          f"{self.path} is no MCAP file (it begins with {head!r}, not MCAP's magic)")
        self.channels: dict[int, Channel] = {}
        self._schemas: dict[int, tuple[str, str, str]] = {}
        self.end = StreamEnd(self.path.stat().st_size)

    def topics(self) -> dict[str, str]:
        """topic -> message type, of every channel up to the end (one pass over the file)."""
        for _ in self.messages(set()):
            pass
        return {c.topic: c.msgtype for c in self.channels.values()}

    def messages(self, topics: set[str] | None = None) -> Iterator[tuple[Channel, int, bytes]]:
        """The messages on `topics` (all: None), in the file's order."""
        with self.path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            self.end = StreamEnd(len(data))  # a file still being written: as far as it was when mapped
            yield from self._records(data, topics)  # slices of an mmap are copies: nothing holds it open

    def _records(self, data, topics: set[str] | None) -> Iterator[tuple[Channel, int, bytes]]:
        end = self.end
        pos = len(MAGIC)
        end.complete_bytes = pos
        while True:
            if pos == len(data):
                end.why = ("the file ends after a complete record, without the summary and footer: what its writer still "
                           "held (a chunk being filled) was never written")
                return
            if pos + 9 > len(data):
                end.why = f"an incomplete record header ({len(data) - pos} of 9 bytes)"
                return
            op, length = data[pos], U64.unpack(data[pos + 1:pos + 9])[0]
            if op not in OPCODES:
                zeros = not any(data[pos:pos + 4096])
                end.why = ("zero bytes where a record begins (blocks the file system had not written)" if zeros
                           else f"an unknown record (opcode 0x{op:02x}): not MCAP from here on")
                return
            body_start, body_end = pos + 9, pos + 9 + length
            if body_end > len(data):
                end.why = f"an incomplete {_NAMES.get(op, 'record')} ({len(data) - body_start} of {length} bytes)"
                if op == CHUNK:
                    yield from self._cut_chunk(data[body_start:], topics)
                return
            body = data[body_start:body_end]
            try:
                if op == CHUNK:
                    from rosbags.rosbag2.storage_mcap import decompress  # checks the size and the crc

                    head = _Reader(body)
                    _, _, size, crc = CHUNK_HEAD.unpack(head.take(CHUNK_HEAD.size))
                    compression = head.string()
                    inner = decompress(bytes(head.take(head.u64())), compression, size, crc)
                    messages = list(self._inner(inner, strict=True))
                else:
                    messages = list(self._record(op, body))
            except Exception as e:  # a damaged record: the stream ends before it
                end.why = f"a damaged {_NAMES.get(op, 'record')} at byte {pos} ({type(e).__name__}: {e})"
                return
            yield from self._counted(messages, topics)
            pos = end.complete_bytes = body_end
            if op == DATA_END:
                end.data_end = True
            if op == FOOTER:
                end.closed = data[pos:pos + len(MAGIC)] == MAGIC
                if end.closed:
                    end.complete_bytes = pos + len(MAGIC)
                    end.why = "" if end.complete_bytes == len(data) else "bytes after the closing magic"
                else:
                    end.why = "the footer is not followed by the closing magic"
                return

    def _counted(self, messages, topics: set[str] | None) -> Iterator[tuple[Channel, int, bytes]]:
        """The messages on `topics` of a complete record, every one counted."""
        end = self.end
        for channel, log_ns, data in messages:
            end.messages += 1
            end.first_ns = log_ns if end.first_ns is None else min(end.first_ns, log_ns)
            end.last_ns = log_ns if end.last_ns is None else max(end.last_ns, log_ns)
            if topics is None or channel.topic in topics:
                yield channel, log_ns, data

    def _cut_chunk(self, body, topics: set[str] | None) -> Iterator[tuple[Channel, int, bytes]]:
        """The complete records at the start of a chunk cut short."""
        try:
            head = _Reader(body)
            head.take(CHUNK_HEAD.size)
            compression = head.string()
            head.u64()
            inner = _decode_start(compression, body[head.pos:])
        except Exception:  # noqa: BLE001 - its header is cut too, or the start does not decode: nothing of it
            return
        messages = list(self._inner(inner, strict=False))
        self.end.partial_messages = len(messages)
        if messages:
            self.end.why += f"; its first {len(messages)} message(s) read"
        yield from self._counted(messages, topics)

    def _inner(self, data: bytes, strict: bool) -> Iterator[tuple[Channel, int, bytes]]:
        """The records inside a chunk; `strict`: a complete chunk, whose records must all be whole (else the
        start of a cut one: its records up to the first incomplete or damaged one)."""
        pos = 0
        while pos < len(data):
            op, length = (data[pos], U64.unpack(data[pos + 1:pos + 9])[0]) if pos + 9 <= len(data) else (0, 0)
            if pos + 9 > len(data) or pos + 9 + length > len(data) or op not in OPCODES:
                if strict:
                    raise ValueError(f"a record (opcode 0x{op:02x}) past the end of its chunk")
                return
            try:
                records = list(self._record(op, data[pos + 9:pos + 9 + length]))
            except Exception:
                if strict:
                    raise
                return
            yield from records
            pos += 9 + length

    def _record(self, op: int, body) -> Iterator[tuple[Channel, int, bytes]]:
        if op == MESSAGE:
            channel_id, _, log_ns, _ = MESSAGE_HEAD.unpack(body[:MESSAGE_HEAD.size])
            channel = self.channels.get(channel_id)
            if channel is None:
                raise ValueError(f"a message on channel {channel_id}, which no channel record defined before it")
            yield channel, log_ns, body[MESSAGE_HEAD.size:]
        elif op == SCHEMA:
            r = _Reader(body)
            schema_id = r.u16()
            self._schemas[schema_id] = (r.string(), r.string(), bytes(r.take(r.u32())).decode())
        elif op == CHANNEL:
            r = _Reader(body)
            channel_id, schema_id = r.u16(), r.u16()
            topic, encoding = r.string(), r.string()
            name, schema_encoding, definition = self._schemas.get(schema_id, ("", "", ""))
            self.channels[channel_id] = Channel(channel_id, topic, name, encoding, schema_encoding, definition)


_NAMES = {HEADER: "header record", FOOTER: "footer", SCHEMA: "schema record", CHANNEL: "channel record",
          MESSAGE: "message record", CHUNK: "chunk record", 0x07: "message index record (no message in it)",
          0x08: "chunk index record (summary)", 0x09: "attachment record", 0x0A: "attachment index record",
          0x0B: "statistics record (summary)", 0x0C: "metadata record", 0x0D: "metadata index record",
          0x0E: "summary offset record", DATA_END: "data end record"}
