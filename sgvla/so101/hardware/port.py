"""The Feetech SDK's serial port, made safe for a reader that is not always on a CPU.

LeRobot's ``FeetechMotorsBus`` talks through scservo_sdk, whose ``PortHandler`` opens the port non-blocking and
whose ``rxPacket`` loop is: read what is there, and if the packet is not complete yet, ask the clock whether the
packet timeout (LeRobot sets about 50 ms) has passed. Three faults follow on a loaded host (or a busy node, whose
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

:func:`make_load_tolerant` fixes these in the bus's own port handler object (``bus.port_handler``, which the
SDK's group readers and writers hold too): a timeout is declared only when no byte of the reply is waiting
(bounded by ``LATE_REPLY_CAP_MS`` past the timeout, so a line that never stops sending still fails), an empty read
waits in ``select`` for up to ``POLL_S`` for bytes instead of
returning at once, and no reply is given up on before ``MIN_WAIT_MS`` (a motor that is really gone is found a
little later: the arm's fault, torque off, comes after its read retries of that wait each).

Not changed: the SDK's pre-send ``clearPort`` only drains output, so a reply to an abandoned instruction can still
be read as the next one's (reproduced against the SDK in tests/hardware/test_port.py's history). Dropping input
there (``reset_input_buffer``) made the follower node's goals stop reaching the simulated servos in 2 of 3 runs of
tests/hardware/test_nodes.py (not root-caused), so it is left as LeRobot has it. Where it mattered most, finding
which motors still answer after a failed read, :func:`answers_ping` reads what is waiting first and pings alone:
there LeRobot's ``ping`` (a ping, then a read of the model number) took a late ping reply of the same motor for
the read's reply, raised IndexError, and the arm's fault said that no motor answered.
"""

from __future__ import annotations

import select

import scservo_sdk as scs

POLL_S = 0.001  # longest sleep of one empty read: the reader wakes as soon as a byte arrives
LATE_REPLY_CAP_MS = 1000.0  # past its timeout, a reply still arriving is read for at most this long
MIN_WAIT_MS = 250.0  # no reply is given up on sooner (LeRobot's timeouts are about 50 ms)


class LoadTolerantPort(scs.PortHandler):
    """scservo_sdk's port handler with the three fixes of the module docstring."""

    def readPort(self, length: int) -> bytes:  # noqa: N802
        data = self.ser.read(length)
        if not data and length > 0:
            select.select([self.ser.fileno()], [], [], POLL_S)
        return data

    def isPacketTimeout(self) -> bool:  # noqa: N802
        elapsed, timeout = self.getTimeSinceStart(), max(self.packet_timeout, MIN_WAIT_MS)
        if self.ser.in_waiting and elapsed <= timeout + LATE_REPLY_CAP_MS:
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


def answers_ping(port: scs.PortHandler, packets: scs.PacketHandler, motor_id: int) -> bool:
    """Whether motor ``motor_id`` answers one ping: what is waiting in the input (replies to abandoned instructions)
    is read and dropped first, and any reply from that motor counts (a late one too: it answered). OSError (pyserial's
    errors) when the port itself fails."""
    while port.ser.in_waiting:
        port.ser.read(port.ser.in_waiting)
    ping = [0] * 6
    ping[scs.PKT_ID], ping[scs.PKT_LENGTH], ping[scs.PKT_INSTRUCTION] = motor_id, 2, scs.INST_PING
    _, result, _ = packets.txRxPacket(port, ping)
    return result == scs.COMM_SUCCESS
