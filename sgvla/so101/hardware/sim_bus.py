"""A simulated bus of Feetech STS3215 servos, served on a pseudo-terminal.

LeRobot's ``FeetechMotorsBus`` (scservo_sdk over pyserial) opens :attr:`SimFeetechBus.port` by path
as if it were the USB adapter of a real arm. Every byte it sends is parsed as a Feetech protocol-0
instruction packet (``0xFF 0xFF id length instruction params checksum``) and answered as the servos
answer, from a register table laid out as in ``lerobot/motors/feetech/tables.py``. Nothing of
LeRobot is mocked, so connect, calibration, sync reads and writes run the real code paths.

Physics is deliberately simple: with torque on, a servo moves its encoder towards Goal_Position
with a first-order lag; with torque off, an optional ``motion(t)`` plays a hand moving the arm
(a leader arm). Faults: a motor that disappears, dropped replies (timeouts), corrupt checksums,
and an unplugged adapter.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import threading
import time
import tty
from collections.abc import Callable, Sequence

from lerobot.motors import MotorCalibration
from lerobot.motors.encoding_utils import decode_sign_magnitude, encode_sign_magnitude
from lerobot.motors.feetech.tables import (
    MODEL_NUMBER_TABLE,
)
from lerobot.motors.feetech.tables import (
    STS_SMS_SERIES_CONTROL_TABLE as TABLE,
)
from lerobot.motors.feetech.tables import (
    STS_SMS_SERIES_ENCODINGS_TABLE as SIGN_BITS,
)

from sgvla.so101.hardware.joints import JOINTS, MOTOR_IDS

PING, READ, WRITE, SYNC_READ, SYNC_WRITE = 0x01, 0x02, 0x03, 0x82, 0x83
BROADCAST_ID = 0xFE
RESOLUTION = 4096
STEPS_PER_DEGREE = (RESOLUTION - 1) / 360  # LeRobot's degrees mode
FIRMWARE = (3, 10)

Motion = Callable[[float], Sequence[float]]  # seconds since start -> encoder position per servo


def checksum(body: bytes | bytearray) -> int:
    return ~sum(body) & 0xFF


def status_packet(motor_id: int, error: int, params: bytes = b"") -> bytes:
    body = bytes([motor_id, len(params) + 2, error]) + params
    return b"\xff\xff" + body + bytes([checksum(body)])


class SimServo:
    """One STS3215: a 128-byte register table plus an encoder that follows Goal_Position."""

    def __init__(self, motor_id: int, position: float = 2048, tau_s: float = 0.05):
        self.id = motor_id
        self.tau_s = tau_s
        self.regs = bytearray(128)
        self.encoder = float(position)  # raw encoder count, before the homing offset
        self.answers = True
        self._t = time.monotonic()
        for name, value in {"Model_Number": MODEL_NUMBER_TABLE["sts3215"], "Firmware_Major_Version": FIRMWARE[0],
                            "Firmware_Minor_Version": FIRMWARE[1], "ID": motor_id, "Return_Delay_Time": 250,
                            "Max_Position_Limit": RESOLUTION - 1, "Max_Torque_Limit": 1000, "Phase": 0x1C,
                            "P_Coefficient": 32, "Acceleration": 0, "Torque_Limit": 1000, "Present_Voltage": 120,
                            "Present_Temperature": 30}.items():
            self.set(name, value)
        self.set("Goal_Position", self.present())  # a servo powers up holding where it is
        self._refresh(0.0)

    def get(self, name: str) -> int:
        addr, size = TABLE[name]
        raw = int.from_bytes(self.regs[addr:addr + size], "little")
        return decode_sign_magnitude(raw, SIGN_BITS[name]) if name in SIGN_BITS else raw

    def set(self, name: str, value: int) -> None:
        addr, size = TABLE[name]
        raw = encode_sign_magnitude(value, SIGN_BITS[name]) if name in SIGN_BITS else value
        self.regs[addr:addr + size] = int(raw).to_bytes(size, "little")

    def present(self) -> int:
        """Present_Position = encoder - Homing_Offset, kept in [0, 4095] (Phase bit 4 cleared)."""
        return (round(self.encoder) - self.get("Homing_Offset")) % RESOLUTION

    def goal_encoder(self) -> float:
        goal, low, high = self.get("Goal_Position"), self.get("Min_Position_Limit"), self.get("Max_Position_Limit")
        if low < high:  # position mode clamps goals to the limits
            goal = min(max(goal, low), high)
        return goal + self.get("Homing_Offset")

    def advance(self, now: float, hand: float | None) -> None:
        dt, self._t = now - self._t, now
        before = self.encoder
        if self.get("Torque_Enable"):
            self.encoder += (self.goal_encoder() - self.encoder) * (1.0 - math.exp(-dt / self.tau_s))
        elif hand is not None:
            self.encoder = float(hand)
        self._refresh((self.encoder - before) / dt if dt > 0 else 0.0)

    def _refresh(self, velocity: float) -> None:
        self.set("Present_Position", self.present())
        self.set("Present_Velocity", max(-32767, min(32767, round(velocity))))
        self.set("Moving", int(bool(self.get("Torque_Enable")) and abs(self.goal_encoder() - self.encoder) >= 1.0))

    def read(self, addr: int, size: int) -> bytes:
        return bytes(self.regs[addr:addr + size])

    def write(self, addr: int, data: bytes) -> None:
        self.regs[addr:addr + len(data)] = data


class SimFeetechBus:
    """Servos with ids ``ids`` on a pseudo-terminal; use as a context manager or call :meth:`close`."""

    def __init__(self, ids: Sequence[int] = (1, 2, 3, 4, 5, 6), positions: Sequence[float] | None = None,
                 motion: Motion | None = None, tau_s: float = 0.05):
        positions = positions or [2048] * len(ids)
        self.servos = {i: SimServo(i, p, tau_s) for i, p in zip(ids, positions, strict=True)}
        self.motion = motion
        self.packets = 0  # instruction packets received
        self._drop = self._corrupt = 0
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no line discipline: bytes pass as on a serial line
        self.port = os.ttyname(self._slave)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"sim-feetech {self.port}", daemon=True)
        self._thread.start()

    # -- fault injection -------------------------------------------------------------------
    def remove(self, motor_id: int) -> None:
        """The motor stops answering (cable pulled, brown-out)."""
        self.servos[motor_id].answers = False

    def restore(self, motor_id: int) -> None:
        self.servos[motor_id].answers = True

    def drop_replies(self, count: int) -> None:
        """The next ``count`` status packets are never sent: the host times out."""
        with self._lock:
            self._drop += count

    def corrupt_replies(self, count: int) -> None:
        """The next ``count`` status packets carry a wrong checksum."""
        with self._lock:
            self._corrupt += count

    def unplug(self) -> None:
        """The USB adapter disappears: the port closes under the host."""
        self.close()

    # -- state for tests -----------------------------------------------------------------
    def positions(self) -> dict[int, int]:
        """Present_Position of every servo now."""
        with self._lock:
            self._advance()
            return {i: s.get("Present_Position") for i, s in self.servos.items()}

    def register(self, motor_id: int, name: str) -> int:
        with self._lock:
            self._advance()
            return self.servos[motor_id].get(name)

    # -- serving ---------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        for fd in (self._master, self._slave):
            os.close(fd)

    def __enter__(self) -> SimFeetechBus:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _advance(self) -> None:
        now = time.monotonic()
        hands = self.motion(now - self._t0) if self.motion else [None] * len(self.servos)
        for servo, hand in zip(self.servos.values(), hands, strict=True):
            servo.advance(now, hand)

    def _serve(self) -> None:
        # Real servos answer from their own hardware: on a loaded machine, answer before other work
        # (needs root or CAP_SYS_NICE; without, the default priority only risks a host timeout).
        with contextlib.suppress(PermissionError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), -10)
        buf = bytearray()
        while not self._stop.is_set():
            if not select.select([self._master], [], [], 0.02)[0]:
                continue
            buf += os.read(self._master, 4096)
            while (packet := self._take_packet(buf)) is not None:
                with self._lock:
                    replies = self._handle(*packet)
                if replies:
                    os.write(self._master, b"".join(replies))

    @staticmethod
    def _take_packet(buf: bytearray) -> tuple[int, int, bytes] | None:
        """(id, instruction, params) of the first whole packet in ``buf``, consumed; None if incomplete."""
        while True:
            start = buf.find(b"\xff\xff")
            if start < 0:
                del buf[:-1]
                return None
            del buf[:start]
            if len(buf) < 4 or len(buf) < buf[3] + 4:
                return None
            size = buf[3] + 4
            packet = bytes(buf[:size])
            if packet[2] == 0xFF or checksum(packet[2:-1]) != packet[-1]:
                del buf[:1]  # not a packet start (or damaged): resynchronise on the next header
                continue
            del buf[:size]
            return packet[2], packet[4], packet[5:-1]

    def _handle(self, motor_id: int, instruction: int, params: bytes) -> list[bytes]:
        self.packets += 1
        self._advance()
        live = {i: s for i, s in self.servos.items() if s.answers}
        if instruction == SYNC_WRITE:
            addr, size = params[0], params[1]
            for k in range(2, len(params), size + 1):
                if params[k] in live:
                    live[params[k]].write(addr, params[k + 1:k + 1 + size])
            return []
        if instruction == SYNC_READ:
            addr, size = params[0], params[1]
            return [self._reply(i, live[i].read(addr, size)) for i in params[2:] if i in live]
        targets = list(live) if motor_id == BROADCAST_ID else [motor_id] if motor_id in live else []
        replies = []
        for i in targets:
            if instruction == PING:
                replies.append(self._reply(i))
            elif instruction == READ:
                replies.append(self._reply(i, live[i].read(params[0], params[1])))
            elif instruction == WRITE:
                live[i].write(params[0], params[1:])
                if motor_id != BROADCAST_ID:
                    replies.append(self._reply(i))
        return [r for r in replies if r]

    def _reply(self, motor_id: int, params: bytes = b"") -> bytes:
        if self._drop:
            self._drop -= 1
            return b""
        packet = status_packet(motor_id, 0, params)
        if self._corrupt:
            self._corrupt -= 1
            packet = packet[:-1] + bytes([packet[-1] ^ 0x5A])
        return packet


def sim_calibration() -> dict[str, MotorCalibration]:
    """A calibration that fits a simulated arm at its power-up pose (every encoder at 2048 = 0 degrees)."""
    ranges = {"wrist_roll": (0, RESOLUTION - 1), "gripper": (2000, 3000)}
    return {j: MotorCalibration(id=MOTOR_IDS[j], drive_mode=0, homing_offset=0,
                                range_min=ranges.get(j, (1024, 3072))[0], range_max=ranges.get(j, (1024, 3072))[1])
            for j in JOINTS}


def leader_motion(t: float) -> list[float]:
    """A hand moving the leader: every joint swings slowly around its middle, the gripper opens and closes."""
    return [2048 + 300 * math.sin(0.5 * t + i) for i in range(5)] + [2500 + 400 * math.sin(0.7 * t)]

