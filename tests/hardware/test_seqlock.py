"""The shared record between the twin and its bus's process: a reader never gets a torn copy and never waits for a
writer that is halfway through a write."""

import subprocess
import sys

import pytest

from sgvla.so101.hardware.seqlock import MAX_TRIES, SharedRecord, TornRecordError

SIZE = 12

pytestmark = pytest.mark.integration  # starts processes (tests/tiers.py)

# A process that multiprocessing did not start has a resource tracker of its own, which (Python < 3.13) would unlink
# the attached record when the writer exits; the bus's process shares its parent's tracker instead.
WRITER = """
import sys
from multiprocessing import resource_tracker
resource_tracker.register = lambda name, rtype: None
from sgvla.so101.hardware.seqlock import SharedRecord
record = SharedRecord.attach(sys.argv[1], int(sys.argv[2]))
print("writing", flush=True)
for i in range(2, int(sys.argv[3])):
    record.write([float(i)] * record.size)  # version i: every value says which write it came from
record.close()
"""


@pytest.fixture
def record():
    shared = SharedRecord.create([1.0] * SIZE)
    yield shared
    shared.close()


def test_values_and_version_round_trip(record):
    assert record.read() == (1, (1.0,) * SIZE)
    assert record.write([float(v) for v in range(SIZE)]) == 2
    reader = SharedRecord.attach(record.name, SIZE)
    try:
        assert reader.read() == (2, tuple(float(v) for v in range(SIZE)))
    finally:
        reader.close()
    with pytest.raises(ValueError, match="3 values written, it holds 12"):
        record.write([0.0] * 3)


def test_a_reader_never_sees_a_torn_write_from_another_process(record):
    writes = 200_000
    writer = subprocess.Popen([sys.executable, "-c", WRITER, record.name, str(SIZE), str(writes)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "writing\n"
        last, reads, distinct = 0, 0, set()
        while writer.poll() is None or reads == 0:
            version, values = record.read()
            assert values == (float(version),) * SIZE or (version, values) == (1, (1.0,) * SIZE), (version, values)
            assert version >= last
            last, reads = version, reads + 1
            distinct.add(version)
        assert writer.wait() == 0
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.communicate()
    assert record.read() == (writes - 1, (float(writes - 1),) * SIZE)
    # The reads really overlapped the writes: versions strictly between the first and the last were seen. How many
    # depends on the scheduler (96 in a stress run, where the reader got a CPU every ~2,060 writes and the former
    # floor of 100 failed): the floor proves overlap, not speed.
    between = distinct - {1, writes - 1}
    assert len(between) >= 10, sorted(distinct)


def test_a_writer_stopped_halfway_does_not_hold_readers_up(record):
    record.write([2.0] * SIZE)
    # Halfway through the next write: the slot being written has an odd sequence number and half-new values.
    buf, latest = record._shm.buf, record._shm.buf[0]
    other = record._slot(1 - latest)
    buf[other] += 1
    buf[other + 16:other + 24] = b"\xff" * 8
    assert record.read() == (2, (2.0,) * SIZE)


def test_a_copy_that_does_not_match_its_checksum_is_never_accepted(record):
    record.write([2.0] * SIZE)
    base = record._slot(record._shm.buf[0])
    record._shm.buf[base + 16] ^= 0x01  # a value changed without its sequence number (a store seen out of order)
    with pytest.raises(TornRecordError, match=f"no consistent copy in {MAX_TRIES} reads"):
        record.read()


def test_a_slow_reader_never_takes_a_write_that_is_not_published_yet(record):
    """A reader that looked up the latest slot, then stalled while the writer published the other slot and refilled
    this one (not yet published), must not return that refill: the next read would give an older version."""
    record.write([2.0] * SIZE)
    buf, slot = record._shm.buf, record._slot

    def stalled(index: int) -> int:
        record._slot = slot
        record.write([3.0] * SIZE)  # published
        published = bytes(buf[:8])
        record.write([4.0] * SIZE)  # written into the slot the reader looked up...
        buf[:8] = published  # ...but not published yet
        return slot(index)

    record._slot = stalled
    assert record.read() == (3, (3.0,) * SIZE)
    assert record.read() == (3, (3.0,) * SIZE)
