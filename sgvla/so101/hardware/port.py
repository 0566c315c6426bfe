"""The Feetech SDK's serial port, made safe for a reader that is not always on a CPU.

LeRobot's ``FeetechMotorsBus`` talks through scservo_sdk, whose ``PortHandler`` opens the port non-blocking and
whose ``rxPacket`` loop is: read what is there, and if the packet is not complete yet, ask the clock whether the
packet timeout (LeRobot sets about 50 ms) has passed. Four faults follow on a loaded host (or a busy node, whose
other threads hold the GIL):

- *a reply that came is reported as lost*: the reader is preempted after a read that found nothing and before the
  clock check; the servo answers meanwhile; back on a CPU, the check sees the time passed and gives "There is no
  status packet" with the reply waiting unread in the input buffer. The tests lost whole buses this way under load.
- *the wait spins*: a non-blocking read in a loop takes a whole CPU while waiting for every reply, which is what
  makes the host loaded in the first place.
- *the kernel delivers late*: a reply's bytes reach the reader through the tty layer's flip buffers, pushed into
  the line discipline by a kernel worker thread (for a USB serial adapter as for the simulated bus's pty) that runs
  among everything else: on a loaded host it ran hundreds of milliseconds late, and every bus of the machine went
  silent at once for that long (both arms of a teleoperation failed within the same millisecond; "motors 1 and 2
  stopped answering" and the other four answered again a moment later). LeRobot's 50 ms timeout, retried three
  times, does not outlast that.
- *a late reply answers the next question*: the SDK's ``clearPort`` before each instruction is ``serial.flush()``,
  which waits for output and leaves input alone, and its ``rxPacket`` checks a reply's header, id range and
  checksum, and ``txRxPacket``/``readRx`` its servo id, but nothing ties a reply to the instruction it answers: a
  reply to an abandoned (timed-out) read of the same motor is taken as the next read's answer, another register's
  value (Max_Position_Limit read as Present_Position), and one of another length gives garbage (a 1-byte reply
  read as a 2-byte value takes its checksum for the high byte) or an IndexError.

:func:`make_load_tolerant` fixes these in the bus's own port handler object (``bus.port_handler``, which the
SDK's group readers and writers hold too): a timeout is declared only when no byte of the reply is waiting
(bounded by ``LATE_REPLY_CAP_MS`` past the timeout, so a line that never stops sending still fails), an empty read
waits in ``select`` for up to ``POLL_S`` for bytes instead of returning at once, and no reply is given up on before
``MIN_WAIT_MS`` (a motor that is really gone is found a little later: the arm's fault, torque off, comes after its
read retries of that wait each). Every reply is matched to its instruction: right before an instruction is sent,
what waits in the input is read and dropped, and so is what the kernel holds undelivered (tcflush TCIFLUSH, which
on a pty or a serial adapter discards this side's input only); the instruction written sets which status packets
answer it (a read: its servo, LENGTH = bytes asked + 2; a ping, write, reg-write or action: its servo, LENGTH 2; a
sync read: each servo asked, once, LENGTH = bytes + 2; a broadcast ping: each servo once, LENGTH 2; a sync write or
other broadcast: none), and the reader hands the SDK only those. Any other whole packet with a valid checksum
(another servo, another length, a second answer from one servo, an answer where none was asked) is dropped and
counted (``mismatched_packets``); a damaged packet that has an expected servo and length goes to the SDK, which
reports "Incorrect status packet" at once, as before (no other answer is coming); a damaged unexpected one is
skipped byte by byte to the next header.

What no check can tell: protocol-0 status packets carry neither the register nor a sequence number, so a reply that
comes *after* the next instruction was sent, from the same servo with the same length (a read of another 2-byte
register of that motor; for the same read it is that register's older value), is taken as the answer. That needs a reply later than the whole wait of
its own instruction (``MIN_WAIT_MS`` and more while bytes arrive) and still ahead of the next one's: a reply that
late and waiting is dropped before the send.

Flushing input before each instruction was tried before and removed because the follower node's goals seemed to
stop reaching the simulated servos (2 of 3 runs of tests/hardware/test_nodes.py, "follower span 0.0"). It was not
the flush: tcflush on the host's end of the pty discards only what the servos sent (the goals go the other way: 2000
writes each followed by a flush all reached the server), the follower node uses its port from one thread only (a
single-threaded executor), and the same span 0.0 was then seen without the flush and found to be the test's
window opening before DDS had matched the arm with the leader (commit 5ef5f9d: the test now waits for the arm's
"following joint_commands"). With that flush alone put back, test_nodes' teleoperation test passed 7 of 7 runs (3 of
them under two busy processes).

Before this, where it mattered most, finding which motors still answer after a failed read, :func:`answers_ping` reads what is
waiting first and pings alone: there LeRobot's ``ping`` (a ping, then a read of the model number) took a late ping
reply of the same motor for the read's reply, raised IndexError, and the arm's fault said that no motor answered.
"""

from __future__ import annotations

import select

import scservo_sdk as scs
import serial

POLL_S = 0.001  # longest sleep of one empty read: the reader wakes as soon as a byte arrives
LATE_REPLY_CAP_MS = 1000.0  # past its timeout, a reply still arriving is read for at most this long
MIN_WAIT_MS = 250.0  # no reply is given up on sooner (LeRobot's timeouts are about 50 ms)
HEADER = b"\xff\xff"
STATUS_MAX_LENGTH = 250  # the SDK's RXPACKET_MAX_LEN: a LENGTH field above it is no packet's
# Instructions answered by a status packet without parameters (LENGTH field 2) when sent to one servo.
BARE_STATUS = {scs.INST_PING, scs.INST_WRITE, scs.INST_REG_WRITE, scs.INST_ACTION}


def checksum(body: bytes | bytearray) -> int:
    return ~sum(body) & 0xFF


def expected_replies(instruction: bytes | list[int]) -> tuple[dict[int, int | None], bool]:
    """The status packets an instruction packet asks for: ({servo id: LENGTH field, None where any length}, whether
    any servo may answer once with a bare status (a broadcast ping, as LeRobot's ``broadcast_ping`` sends))."""
    motor_id, code, params = instruction[scs.PKT_ID], instruction[scs.PKT_INSTRUCTION], bytes(instruction[5:-1])
    if motor_id == scs.BROADCAST_ID:
        if code == scs.INST_SYNC_READ and len(params) >= 2:
            return {i: params[1] + 2 for i in params[2:]}, False
        return {}, code == scs.INST_PING  # sync write, broadcast write, action: no reply
    if code == scs.INST_READ and len(params) >= 2:
        return {motor_id: params[1] + 2}, False
    return {motor_id: 2 if code in BARE_STATUS else None}, False


class LoadTolerantPort(scs.PortHandler):
    """scservo_sdk's port handler with the fixes of the module docstring.

    ``stale_bytes`` counts the input dropped before instructions were sent, ``mismatched_packets`` the whole
    packets read after one that answered no outstanding part of it (wrong servo, wrong length, a second answer, an
    answer where none was asked for), both since the port was made tolerant."""

    def __init__(self, port_name: str):
        super().__init__(port_name)
        self._start_matching()

    def _start_matching(self) -> None:
        self._rx = bytearray()  # bytes read from the line, not yet sorted into packets
        self._ready = bytearray()  # packets that answer the instruction, for the SDK to read
        self._want: dict[int, int | None] = {}  # servo id -> LENGTH field of the reply still owed
        self._any_servo = False  # a broadcast ping: each servo may answer once
        self._answered: set[int] = set()
        self.stale_bytes = 0
        self.mismatched_packets = 0

    # -- before an instruction: nothing that came before it is its reply ------------------------------------------
    def clearPort(self) -> None:  # noqa: N802 - the SDK's names
        """The SDK calls this right before it writes an instruction: what is waiting in the input is read and
        dropped, and so is what the kernel holds but has not delivered yet (tcflush: on a pty or a USB adapter this
        side's input only, never what is being sent), then output is drained as the SDK does."""
        try:
            waiting = self.ser.in_waiting
        except OSError as e:  # pyserial gives the ioctl's own error here, SerialException from reads and writes
            raise serial.SerialException(f"could not read the input of {self.port_name}: {e}") from e
        stale = len(self._rx) + len(self._ready) + (len(self.ser.read(waiting)) if waiting else 0)
        self.ser.reset_input_buffer()
        self._rx.clear()
        self._ready.clear()
        self.stale_bytes += stale
        super().clearPort()

    def writePort(self, packet) -> int:  # noqa: N802
        """Send an instruction; from now on only its replies reach the SDK."""
        self._want, self._any_servo = expected_replies(packet)
        self._answered = set()
        return super().writePort(packet)

    # -- after it: only its replies are read ---------------------------------------------------------------------
    def readPort(self, length: int) -> bytes:  # noqa: N802
        if len(self._ready) < length:
            data = self.ser.read(max(length, self.ser.in_waiting))
            if data:
                self._rx += data
                self._sort()
            elif length > 0 and not self._ready:
                select.select([self.ser.fileno()], [], [], POLL_S)
        data = bytes(self._ready[:length])
        del self._ready[:length]
        return data

    def _sort(self) -> None:
        """Move each whole packet of ``_rx`` to ``_ready`` if it answers the instruction, else drop it."""
        rx = self._rx
        while True:
            start = rx.find(HEADER)
            if start < 0:
                del rx[:-1 if rx.endswith(b"\xff") else len(rx)]
                return
            del rx[:start]
            if len(rx) < 4:
                return
            motor_id, length = rx[2], rx[3]
            if motor_id == 0xFF or not 2 <= length <= STATUS_MAX_LENGTH:
                del rx[:1]  # not a packet's start: look for the next header
                continue
            if len(rx) < length + 4:
                return  # the rest is still on its way
            packet = bytes(rx[:length + 4])
            intact = checksum(packet[2:-1]) == packet[-1]
            if self._answers(motor_id, length):
                # A damaged answer goes to the SDK too, which reports "Incorrect status packet" at once (no other
                # answer is coming); its data is never used.
                self._ready += packet
                del rx[:len(packet)]
            elif intact:
                self.mismatched_packets += 1
                del rx[:len(packet)]
            else:
                del rx[:1]  # damaged and not expected: maybe no packet at all; resynchronise on the next header

    def _answers(self, motor_id: int, length: int) -> bool:
        """Whether a status packet from ``motor_id`` with this LENGTH field is an answer still owed (and count it)."""
        if motor_id in self._want:
            if self._want[motor_id] not in (None, length):
                return False
            del self._want[motor_id]
            return True
        if self._any_servo and motor_id < scs.BROADCAST_ID and length == 2 and motor_id not in self._answered:
            self._answered.add(motor_id)
            return True
        return False

    def isPacketTimeout(self) -> bool:  # noqa: N802
        elapsed, timeout = self.getTimeSinceStart(), max(self.packet_timeout, MIN_WAIT_MS)
        arriving = self.ser.in_waiting or self._ready or self._rx  # bytes waiting, or a packet half read
        if arriving and elapsed <= timeout + LATE_REPLY_CAP_MS:
            return False  # the reply is here: the next read takes it
        if elapsed > timeout:
            self.packet_timeout = 0  # as the SDK's: the packet timed out
            return True
        return False


def make_load_tolerant(bus) -> None:
    """Give a LeRobot Feetech bus (before ``connect``) the port handler described in the module docstring."""
    handler = bus.port_handler
    if isinstance(handler, LoadTolerantPort):
        return
    if type(handler) is not scs.PortHandler:
        raise TypeError(f"expected scservo_sdk's PortHandler on the bus, found {type(handler).__name__}")
    # The same object, whose class alone changes: the SDK's group readers and writers hold it, and LeRobot patched
    # its setPacketTimeout on the instance.
    handler.__class__ = LoadTolerantPort
    handler._start_matching()


def answers_ping(port: scs.PortHandler, packets: scs.PacketHandler, motor_id: int) -> bool:
    """Whether motor ``motor_id`` answers one ping: what is waiting in the input (replies to abandoned instructions)
    is read and dropped first, and a ping reply from that motor counts (a late one to an earlier ping too: it
    answered). OSError (pyserial's errors) when the port itself fails."""
    while port.ser.in_waiting:
        port.ser.read(port.ser.in_waiting)
    ping = [0] * 6
    ping[scs.PKT_ID], ping[scs.PKT_LENGTH], ping[scs.PKT_INSTRUCTION] = motor_id, 2, scs.INST_PING
    _, result, _ = packets.txRxPacket(port, ping)
    return result == scs.COMM_SUCCESS
