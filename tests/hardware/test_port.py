"""The Feetech SDK's port as sgvla's arms use it (`sgvla.so101.hardware.port`), against the SDK's own, on the simulated
bus with LeRobot's FeetechMotorsBus: a reply that came while the reader was off the CPU is read, not reported lost;
a reply to an abandoned instruction never answers the next one; waiting does not spin."""

import resource
import time

import pytest
import scservo_sdk as scs
from lerobot.motors import Motor, MotorNormMode
from lerobot.motors.feetech import FeetechMotorsBus

from sgvla.so101.hardware.joints import JOINTS, MOTOR_IDS
from sgvla.so101.hardware.port import MIN_WAIT_MS, make_load_tolerant
from sgvla.so101.hardware.servo_server import READ, instruction_packet
from sgvla.so101.hardware.sim_bus import SimFeetechBus, sim_calibration

pytestmark = pytest.mark.integration  # starts processes (tests/tiers.py)

PREEMPTED_S = 0.3  # off the CPU after an empty read: longer than any timeout of the port
LATE_S = 0.4  # a reply this late has been given up on by either port (LeRobot's ~50 ms, sgvla's MIN_WAIT_MS)
IN_FLIGHT_S = 0.15  # a reply this late to an abandoned instruction comes while the next one waits for its own


@pytest.fixture
def sim():
    with SimFeetechBus() as bus:
        yield bus


def connected(sim, tolerant: bool) -> FeetechMotorsBus:
    """LeRobot's bus, connected (its handshake pings every motor once, so through the tolerant port on a loaded
    machine), then left on the tolerant port or given the SDK's own back."""
    motors = {j: Motor(MOTOR_IDS[j], "sts3215", MotorNormMode.DEGREES) for j in JOINTS}
    bus = FeetechMotorsBus(sim.port, motors, calibration=sim_calibration())
    make_load_tolerant(bus)
    bus.connect()
    if not tolerant:
        bus.port_handler.__class__ = scs.PortHandler
    return bus


def preempt_after_empty_reads(bus: FeetechMotorsBus, times: int) -> None:
    """The reader loses the CPU right after a read that found nothing, `times` times: what a loaded host (or
    another thread holding the GIL) does to it at random moments, here at the worst one. The read is one that came
    just before the reply's first byte: it returns nothing, whatever the simulated servo (which runs ahead of this
    process) has sent by now."""
    handler = bus.port_handler
    read, left = handler.readPort, [times]

    def read_then_lose_the_cpu(length):
        if left[0] > 0:
            left[0] -= 1
            time.sleep(PREEMPTED_S)
            return b""
        return read(length)

    handler.readPort = read_then_lose_the_cpu


@pytest.mark.parametrize("tolerant", [False, True], ids=["sdk_port", "load_tolerant_port"])
def test_a_reply_that_came_while_the_reader_was_preempted_is_read(sim, tolerant):
    bus = connected(sim, tolerant)
    try:
        preempt_after_empty_reads(bus, times=1)
        if tolerant:
            assert bus.read("Present_Position", "elbow_flex", normalize=False) == sim.positions()[3]
        else:  # the SDK's port: the reply sits in the input buffer, and the read is reported lost
            with pytest.raises(ConnectionError, match="no status packet"):
                bus.read("Present_Position", "elbow_flex", normalize=False, num_retry=0)
    finally:
        bus.disconnect(disable_torque=False)


def waiting_input(bus: FeetechMotorsBus, timeout_s: float = 10.0) -> None:
    """Until the host's input holds bytes (the abandoned reply has come and waits, whatever the machine's load)."""
    deadline = time.monotonic() + timeout_s
    while not bus.port_handler.ser.in_waiting:
        assert time.monotonic() < deadline, "the late reply never came"
        time.sleep(0.01)


@pytest.mark.parametrize("tolerant", [False, True], ids=["sdk_port", "load_tolerant_port"])
def test_a_late_reply_to_a_timed_out_read_does_not_answer_the_next_read(sim, tolerant):
    """LeRobot's wrong-register read: a read of elbow_flex's Max_Position_Limit times out (its reply comes LATE_S
    late); the reply arrives while nothing is asked; the next read, of the same motor's Present_Position (2 bytes
    too, so nothing in the packet tells them apart), is answered from the input. The SDK's port returns the limit
    as the position; sgvla's drops what waits before it sends the read, and returns the position."""
    bus = connected(sim, tolerant)
    try:
        present = bus.read("Present_Position", "elbow_flex", normalize=False)
        limit = sim.register(3, "Max_Position_Limit")
        assert limit != present
        sim.late_replies(1, LATE_S)
        with pytest.raises(ConnectionError, match="no status packet"):
            bus.read("Max_Position_Limit", "elbow_flex", normalize=False, num_retry=0)
        waiting_input(bus)
        got = bus.read("Present_Position", "elbow_flex", normalize=False, num_retry=0)
        if tolerant:
            assert got == present == sim.positions()[3]
            assert bus.port_handler.stale_bytes == 8  # the limit's reply: header, id, length, error, 2 bytes, checksum
        else:
            assert got == limit  # another register's value, as elbow_flex's position
    finally:
        bus.disconnect(disable_torque=False)


@pytest.mark.parametrize("how", ["read", "sync_read"])
def test_a_reply_arriving_while_the_next_instruction_waits_is_not_its_answer(sim, how):
    """A reply to an abandoned instruction (a 1-byte read of Lock, sent behind the port's back, as by a reader that
    gave up) comes IN_FLIGHT_S late: after the next instruction was sent, before that one's reply (which waits
    behind it, as bytes on one line do). Nothing was waiting to drop before the send; the late packet is from a
    servo that is asked, but its length is a 1-byte read's: sgvla's port drops it, and the read gets positions."""
    bus = connected(sim, tolerant=True)
    handler = bus.port_handler
    try:
        address, size = bus.model_ctrl_table["sts3215"]["Lock"]
        assert size == 1
        sim.late_replies(1, IN_FLIGHT_S)
        handler.ser.write(instruction_packet(1, READ, bytes([address, size])))  # the first motor a sync read asks
        if how == "read":
            got = {"shoulder_pan": bus.read("Present_Position", "shoulder_pan", normalize=False, num_retry=0)}
        else:
            got = bus.sync_read("Present_Position", normalize=False, num_retry=0)
        positions = sim.positions()
        assert got == {j: positions[MOTOR_IDS[j]] for j in got}
        assert handler.mismatched_packets == 1 and handler.stale_bytes == 0
    finally:
        bus.disconnect(disable_torque=False)


def test_waiting_for_a_reply_sleeps_instead_of_spinning(sim):
    """The SDK's port reads in a loop without pause while it waits (a whole CPU per waiting bus); this one sleeps
    in select until a byte comes. A motor that never answers makes every ping wait out its whole timeout."""
    bus = connected(sim, tolerant=True)
    sim.remove(2)
    try:
        before, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        for _ in range(5):
            assert bus.ping("shoulder_lift") is None  # timed out
        after, wall_s = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - wall
        cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        assert wall_s > 5 * MIN_WAIT_MS / 1000  # each ping waited out the port's shortest wait
        assert cpu_s < 0.3 * wall_s, (cpu_s, wall_s)
    finally:
        bus.disconnect(disable_torque=False)
