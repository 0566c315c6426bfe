"""A record of floats in shared memory that one process writes and another reads, neither ever waiting.

The twin's servo bus (sgvla/so101/twin/bus.py) passes joint encoders from the process that runs MuJoCo to the
bus's own process, and goals back. A lock would make the bus wait whenever the twin's side holds it, and a Python
thread holding a lock can itself wait tens of milliseconds for its process's GIL. A seqlock never blocks the
reader, but a plain one makes the reader retry for as long as a writer is halfway through a write, which is as long
as that writer is descheduled. So the record is double-buffered: the writer fills the slot that readers are not
pointed at and only then points them at it. A reader copies the slot it is pointed at and keeps the copy only when
the slot's sequence number was even and unchanged across the copy, the CRC-32 stored with the values matches them,
and readers are still pointed at that slot (else a reader that was slow to start its copy could take a write that is
not published yet, then the older published one: versions would go back). The CRC is what makes a torn copy
impossible to accept also on CPUs that may make stores visible out of order (Python has no memory barrier). A reader
retries only when the writer published during its copy, never waits for a writer halfway through a write.

Standard library only: this module runs in the bus's child process (sgvla/so101/hardware/servo_server.py).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from multiprocessing import shared_memory

_U64 = struct.Struct("<Q")
MAX_TRIES = 10_000


class TornRecordError(RuntimeError):
    """No consistent copy of a shared record could be read (its writer died mid-write more than once?)."""


class SharedRecord:
    """``size`` floats plus a version (the number of writes) in shared memory; one writer at a time.

    Layout: the index of the latest slot, then two slots of [sequence, version, values, CRC-32]."""

    def __init__(self, size: int, name: str, create: bool):
        self.size = size
        self._payload = struct.Struct(f"<Q{size}d")  # version, values
        self._slot_bytes = _U64.size + self._payload.size + _U64.size
        total = _U64.size + 2 * self._slot_bytes
        self._shm = shared_memory.SharedMemory(name=name or None, create=create, size=total if create else 0)
        if self._shm.size < total:
            self._shm.close()
            raise ValueError(f"shared record {name!r} holds {self._shm.size} bytes, {size} floats need {total}")
        self.name = self._shm.name
        self.owner = create

    @classmethod
    def create(cls, values: Sequence[float]) -> SharedRecord:
        """A new record holding ``values`` (version 1); its creator unlinks it (:meth:`close`)."""
        record = cls(len(values), "", create=True)
        record.write(values)
        return record

    @classmethod
    def attach(cls, name: str, size: int) -> SharedRecord:
        """The record another process created."""
        return cls(size, name, create=False)

    def _slot(self, index: int) -> int:
        return _U64.size + (index & 1) * self._slot_bytes

    def write(self, values: Sequence[float]) -> int:
        """Publish ``values``; returns the new version. Never waits."""
        if len(values) != self.size:
            raise ValueError(f"shared record {self.name}: {len(values)} values written, it holds {self.size}")
        buf = self._shm.buf
        latest = _U64.unpack_from(buf, 0)[0] & 1
        version = _U64.unpack_from(buf, self._slot(latest) + _U64.size)[0] + 1
        base = self._slot(1 - latest)
        payload = self._payload.pack(version, *values)
        seq = _U64.unpack_from(buf, base)[0]
        _U64.pack_into(buf, base, seq + 1)  # odd: being written
        buf[base + _U64.size:base + _U64.size + len(payload)] = payload
        _U64.pack_into(buf, base + _U64.size + len(payload), zlib.crc32(payload))
        _U64.pack_into(buf, base, seq + 2)
        _U64.pack_into(buf, 0, 1 - latest)
        return version

    def read(self) -> tuple[int, tuple[float, ...]]:
        """(version, values) of the latest complete write. Never waits for the writer."""
        buf, size = self._shm.buf, self._payload.size
        for _ in range(MAX_TRIES):
            latest = _U64.unpack_from(buf, 0)[0]
            base = self._slot(latest)
            seq = _U64.unpack_from(buf, base)[0]
            payload = bytes(buf[base + _U64.size:base + _U64.size + size])
            crc = _U64.unpack_from(buf, base + _U64.size + size)[0]
            if (seq % 2 == 0 and _U64.unpack_from(buf, base)[0] == seq and zlib.crc32(payload) == crc
                    and _U64.unpack_from(buf, 0)[0] == latest):
                version, *values = self._payload.unpack(payload)
                return version, tuple(values)
        raise TornRecordError(f"shared record {self.name}: no consistent copy in {MAX_TRIES} reads")

    def close(self) -> None:
        """Detach; the creator also removes the record."""
        self._shm.close()
        if self.owner:
            self._shm.unlink()
            self.owner = False
