"""A simulated bus of Feetech STS3215 servos, served on a pseudo-terminal by a process of its own.

LeRobot's ``FeetechMotorsBus`` (scservo_sdk over pyserial) opens :attr:`SimFeetechBus.port` by path
as if it were the USB adapter of a real arm. Every byte it sends is parsed as a Feetech protocol-0
instruction packet (``0xFF 0xFF id length instruction params checksum``) and answered as the servos
answer, from a register table laid out as in ``lerobot/motors/feetech/tables.py``. Nothing of
LeRobot is mocked, so connect, calibration, sync reads and writes run the real code paths.

Why a process. A real servo answers from its own hardware, within LeRobot's packet timeout (about 50 ms),
whatever the computer that asks is doing. A reply thread in the process that uses the bus answers only when it
gets that process's GIL, which it shares there with MuJoCo physics and rendering (``sgvla record --config twin``),
torch, LeRobot's busy-polling reads, a recording loop or a test. So the pty and the server loop
(:func:`sgvla.so101.hardware.servo_server.serve`) live in a child process started with the spawn method: a fresh
interpreter that imports the standard library and servo_server only (LeRobot's register table is passed to it as
data, a leader's motion as a picklable object), answers packets and this object's requests (register reads, fault
injection, close) from one select loop, dies with its parent and is reaped on :meth:`SimFeetechBus.close`.
benchmarks/bench_sim_bus.py measures both designs side by side (2 CPUs, two busy processes, the twin's physics and
cameras in the process): with nothing else in that process both answered 10,000 packets without a loss; with two
more threads of pure-Python work there, the thread lost 0.8 % of its replies and the process 0.28 %, the process's
losses being requests or replies that the loaded machine delivered late (instrumented: the server answered each
within 0.3 ms of receiving it, some requests reached it 60 ms after they were sent), not a wait for any GIL.

Physics is deliberately simple: with torque on, a servo moves its encoder towards Goal_Position
with a first-order lag; with torque off, an optional ``motion`` (e.g. :class:`SineMotion`) plays a hand
moving the arm (a leader arm). Faults: a motor that disappears, dropped replies (timeouts), corrupt
checksums, and an unplugged adapter.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import pickle
import threading
import time
from collections.abc import Sequence
from functools import cache
from typing import Any

from lerobot.motors import MotorCalibration
from lerobot.motors.feetech.tables import MODEL_NUMBER_TABLE
from lerobot.motors.feetech.tables import STS_SMS_SERIES_CONTROL_TABLE as TABLE
from lerobot.motors.feetech.tables import STS_SMS_SERIES_ENCODINGS_TABLE as SIGN_BITS

from sgvla.so101.hardware.joints import JOINTS, MOTOR_IDS
from sgvla.so101.hardware.servo_server import (
    RESOLUTION,
    STEPS_PER_DEGREE,
    BusSpec,
    HeldPose,
    Motion,
    RegisterTable,
    SineMotion,
    run_child,
)

__all__ = ["LEADER_MOTION", "RESOLUTION", "STEPS_PER_DEGREE", "HeldPose", "SimFeetechBus", "SineMotion",
           "register_table", "sim_calibration"]

START_TIMEOUT_S = 60.0  # a spawned interpreter on a loaded machine
ANSWER_TIMEOUT_S = 10.0

# The hand on `sgvla sim-bus`'s leader: every joint swings +-300 steps (26 degrees) about its middle at 0.08 Hz,
# the gripper between 2100 and 2900 steps.
LEADER_MOTION = SineMotion(amplitude=300, frequency_hz=0.5 / math.tau, gripper_range=(2100, 2900),
                           gripper_frequency_hz=0.7 / math.tau)


@cache
def register_table() -> RegisterTable:
    """The STS3215 register table of LeRobot's feetech tables, as data for a bus's process."""
    return RegisterTable(addresses=dict(TABLE), sign_bits=dict(SIGN_BITS), model_number=MODEL_NUMBER_TABLE["sts3215"])


class BusClosed(RuntimeError):
    """The simulated bus was closed (or unplugged); it has no servos to ask any more."""


class SimFeetechBus:
    """Servos with ids ``ids`` on a pseudo-terminal, answered by a child process; use as a context manager or
    call :meth:`close`.

    ``motion`` must pickle (a module-level class such as :class:`SineMotion`), and should not live in a module
    that imports anything heavy: the child imports it. So does multiprocessing's spawn method with the main module
    of this process (``python -m sgvla.cli``, pytest and the ``sgvla`` script import nothing heavy; a script of
    your own keeps its heavy imports in functions, as benchmarks/bench_sim_bus.py does). Create a bus from a thread
    that outlives it (the main thread): the child is killed when the thread that started it ends
    (PR_SET_PDEATHSIG)."""

    def __init__(self, ids: Sequence[int] = (1, 2, 3, 4, 5, 6), positions: Sequence[float] | None = None,
                 motion: Motion | None = None, tau_s: float = 0.05):
        positions = list(positions or [2048] * len(ids))
        if len(positions) != len(ids):
            raise ValueError(f"simulated bus: {len(positions)} positions for {len(ids)} servo ids {list(ids)}")
        if motion is not None:
            try:
                pickle.dumps(motion)
            except Exception as e:
                raise TypeError(f"simulated bus: the motion must pickle to reach the bus's process (a module-level "
                                f"class such as SineMotion, not a lambda or local function): {e}") from None
        self.ids = tuple(ids)
        self._lock = threading.Lock()  # one request and its answer at a time
        self._closed = False
        self.port = ""
        self._conn = self._launch(self._spec(self.ids, positions, motion, tau_s))
        self.port = self._await_ready()

    def _spec(self, ids: tuple[int, ...], positions: list[float], motion: Motion | None, tau_s: float) -> BusSpec:
        return BusSpec(ids, tuple(float(p) for p in positions), register_table(), tau_s, motion)

    # -- the server's process ---------------------------------------------------------------------
    def _launch(self, spec: BusSpec) -> Any:
        """Start the server in a child process; returns this end of the control pipe."""
        context = multiprocessing.get_context("spawn")
        mine, theirs = context.Pipe()
        self._process = context.Process(target=run_child, args=(theirs, spec, os.getpid()), name="sim-feetech",
                                        daemon=True)
        self._process.start()
        theirs.close()
        return mine

    def _host_alive(self) -> bool:
        return self._process.is_alive()

    def _reap(self) -> None:
        """Wait for the server to end after close (kill it if it does not), and release it."""
        self._process.join(timeout=ANSWER_TIMEOUT_S)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._process.close()

    @property
    def server_pid(self) -> int | None:
        """Process id of the server (None once reaped)."""
        return None if self._closed else self._process.pid

    def _await_ready(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while not self._conn.poll(0.05):
                if not self._host_alive() or time.monotonic() > deadline:
                    raise BusClosed(f"simulated bus: its process did not start in {START_TIMEOUT_S:.0f} s "
                                    "or ended before serving")
            kind, value = self._conn.recv()
            if kind != "ready":
                raise BusClosed(value)
        except (BusClosed, EOFError, OSError) as e:
            self._closed = True
            self._conn.close()
            self._reap()
            raise BusClosed(str(e) or "simulated bus: its process ended before serving") from None
        return value

    def _request(self, *request) -> Any:
        with self._lock:
            if self._closed:
                raise BusClosed(f"simulated bus on {self.port} is closed")
            try:
                self._conn.send(request)
                if not self._conn.poll(ANSWER_TIMEOUT_S):
                    raise BusClosed(f"simulated bus on {self.port}: no answer to {request[0]!r} in "
                                    f"{ANSWER_TIMEOUT_S:.0f} s")
                status, value = self._conn.recv()
            except (EOFError, OSError) as e:
                raise BusClosed(f"simulated bus on {self.port}: its process is gone ({e})") from None
        if status == "error":
            raise ValueError(f"simulated bus on {self.port}: {value}")
        return value

    # -- fault injection -------------------------------------------------------------------
    def remove(self, motor_id: int) -> None:
        """The motor stops answering (cable pulled, brown-out)."""
        self._request("remove", motor_id)

    def restore(self, motor_id: int) -> None:
        self._request("restore", motor_id)

    def drop_replies(self, count: int) -> None:
        """The next ``count`` status packets are never sent: the host times out."""
        self._request("drop", count)

    def corrupt_replies(self, count: int) -> None:
        """The next ``count`` status packets carry a wrong checksum."""
        self._request("corrupt", count)

    def late_replies(self, count: int, delay_s: float) -> None:
        """The replies to the next ``count`` instructions reach the host ``delay_s`` late, and what follows them waits
        behind (a loaded host's tty layer delivered replies hundreds of milliseconds late: sgvla/so101/hardware/port.py)."""
        self._request("late", count, delay_s)

    def stall(self, seconds: float) -> None:
        """The bus's process stops running for ``seconds`` (as on a host that does not give it a CPU: a loaded VM
        stopped both simulated buses of a teleoperation for about a second); what the host sends meanwhile is
        answered when it runs again."""
        self._request("stall", seconds)

    def unplug(self) -> None:
        """The USB adapter disappears: the port closes under the host."""
        self.close()

    # -- state for tests -----------------------------------------------------------------
    def positions(self) -> dict[int, int]:
        """Present_Position of every servo now."""
        return self._request("positions")

    def register(self, motor_id: int, name: str) -> int:
        return self._request("register", motor_id, name)

    @property
    def packets(self) -> int:
        """Instruction packets received so far."""
        return self._request("packets")

    def health(self) -> dict[str, float | int]:
        """How the server kept up (servo_server.ServerHealth): for a failing test's message."""
        return self._request("health")

    def server_modules(self) -> list[str]:
        """The modules the server's process has imported (it must stay free of torch, LeRobot, MuJoCo)."""
        return self._request("modules")

    # -- life ------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the pty (the port disappears), end the server and reap its process."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._conn.send(("close",))
                if self._conn.poll(ANSWER_TIMEOUT_S):
                    self._conn.recv()  # the pty is closed
            except (EOFError, OSError):
                pass  # already gone
            self._conn.close()
        self._reap()

    def __enter__(self) -> SimFeetechBus:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def sim_calibration() -> dict[str, MotorCalibration]:
    """A calibration that fits a simulated arm at its power-up pose (every encoder at 2048 = 0 degrees)."""
    ranges = {"wrist_roll": (0, RESOLUTION - 1), "gripper": (2000, 3000)}
    return {j: MotorCalibration(id=MOTOR_IDS[j], drive_mode=0, homing_offset=0,
                                range_min=ranges.get(j, (1024, 3072))[0], range_max=ranges.get(j, (1024, 3072))[1])
            for j in JOINTS}
