"""The SO101 MuJoCo twin behind the interfaces of the real arm: in process, and as a Feetech bus on a pty.

- :class:`TwinArm`: :class:`~sgvla.so101.hardware.arm.FollowerArm` whose device is the twin, so every goal takes the
  real arm's code path (safe_goal limits, per-tick bound, Watchdog hold); used by the ``so101_twin`` node.
- :class:`TwinFeetechBus`: a :class:`~sgvla.so101.hardware.sim_bus.SimFeetechBus` whose six servos are the twin's
  joints. Present_Position is the twin's joint, in encoder steps through the calibration exactly as LeRobot
  reads it (degrees mode about the range middle; the gripper's 0..100 % over its range, mapped onto the URDF
  gripper limits); a Goal_Position written with torque on becomes the twin's joint target. LeRobot's
  SO101Follower talks to it unchanged (``sgvla record --config twin``).
- :class:`TwinClock`: a thread advancing the twin's physics in real time at its control period, and exchanging
  joints and goals with the bus at every tick.

The twin (MuJoCo, rendering) stays in the process that records; the bus's servos answer from their own process,
like every simulated bus (sgvla/so101/hardware/sim_bus.py says why), so that neither the twin's lock nor this process's
GIL can hold a reply back. The two meet in shared memory (:class:`~sgvla.so101.hardware.seqlock.SharedRecord`, where
neither side ever waits for the other): after every physics tick the clock writes the joints' encoder counts and
velocities, which the servos report; every WRITE/SYNC_WRITE makes the servos write their goals and torque flags,
which the clock applies as joint targets before the next tick (physics only moves at ticks, so a goal takes effect
as soon as it did when the bus called the twin directly).

Torque off (LeRobot's disconnect, a fault) makes the twin hold where it is: the model has no limp mode.
"""

from __future__ import annotations

import contextlib
import logging
import math
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lerobot.motors import MotorCalibration

from sgvla.so101.hardware.arm import FollowerArm
from sgvla.so101.hardware.config import ArmConfig
from sgvla.so101.hardware.joints import GRIPPER, JOINTS, MOTOR_IDS, URDF_LIMITS, action_key, from_radians, to_radians
from sgvla.so101.hardware.safety import SafetyConfig
from sgvla.so101.hardware.seqlock import SharedRecord
from sgvla.so101.hardware.servo_server import RESOLUTION, STEPS_PER_DEGREE, BusSpec, TwinLink
from sgvla.so101.hardware.sim_bus import SimFeetechBus

log = logging.getLogger(__name__)

TWIN_PORT = "twin"  # a rig whose follower port is this drives the twin (config/hardware/twin.yaml)


def radians_of(positions: Mapping[str, float]) -> dict[str, float]:
    """LeRobot positions of any subset of joints -> radians by joint name."""
    full = to_radians({**dict.fromkeys(JOINTS, 0.0), **positions})
    return {j: r for j, r in zip(JOINTS, full, strict=True) if j in positions}


def lerobot_of(radians: Mapping[str, float]) -> dict[str, float]:
    """Radians by joint name -> LeRobot positions (degrees; gripper 0..100 %)."""
    names = [j for j in JOINTS if j in radians]
    return from_radians(names, [radians[j] for j in names])


# -- in process -------------------------------------------------------------------------------------

class TwinDevice:
    """The twin as the robot LeRobot's SO101Follower is to FollowerArm: observations and actions by
    ``<joint>.pos`` in LeRobot units."""

    def __init__(self, twin: Any):
        self.twin = twin

    def get_observation(self) -> dict[str, float]:
        return {action_key(j): v for j, v in lerobot_of(self.twin.joint_positions()).items()}

    def send_action(self, action: Mapping[str, float]) -> None:
        self.twin.set_joint_targets(radians_of({j: action[action_key(j)] for j in JOINTS if action_key(j) in action}))

    def hold(self) -> None:
        self.twin.set_joint_targets(self.twin.joint_positions())


class TwinArm(FollowerArm):
    """The follower arm with the twin for motors: command/step/Watchdog are FollowerArm's own."""

    def __init__(self, twin: Any, safety: SafetyConfig):
        super().__init__(ArmConfig(port=TWIN_PORT, id="so101_twin", calibration_dir="."), safety)
        self.twin = twin

    def connect(self):
        self.device = TwinDevice(self.twin)
        self.device.hold()  # goal := present, as FollowerArm's bring-up does before torque is on
        self.holding = True
        return self.read()

    def hold(self) -> None:
        self._require_connected()
        self.device.hold()
        self.target = {}
        self.holding = True

    def close(self) -> None:
        if self.device is not None:
            self.device.hold()
            self.device = None


class TwinClock:
    """Advances the twin's physics in real time, one control period per tick, on a thread of its own; with a
    ``bus``, applies the goals its servos received before each tick and publishes the joints after it.

    After a stall (a slow render, a save) it catches up by at most ``max_catch_up_s`` at once; the
    time it could not catch up is counted in ``lag_s``."""

    def __init__(self, twin: Any, max_catch_up_s: float = 0.25, bus: TwinFeetechBus | None = None):
        self.twin, self.max_catch_up_s, self.bus = twin, max_catch_up_s, bus
        self.period = float(twin.control_period)
        self.ticks, self.lag_s = 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="twin physics", daemon=True)

    def start(self) -> TwinClock:
        self._thread.start()
        return self

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(max(0.0, last + self.period - time.monotonic())):
            now = time.monotonic()
            elapsed, last = now - last, now
            step = min(elapsed, self.max_catch_up_s)
            self.lag_s += elapsed - step
            if self.bus is not None:
                self.bus.apply_goals()
            self.twin.advance(step)
            if self.bus is not None:
                self.bus.publish()
            self.ticks += 1

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)


# -- as a Feetech bus -------------------------------------------------------------------------------

def twin_calibration() -> dict[str, MotorCalibration]:
    """A calibration whose ranges span the URDF limits: body joints centred on 2048 (= 0 degrees, range wide
    enough for the larger limit), the gripper's range from its lower to its upper URDF limit."""
    calibration = {}
    for joint in JOINTS:
        low, high = (math.degrees(v) for v in URDF_LIMITS[joint])
        if joint == GRIPPER:
            lo, hi = 2048 + math.floor(low * STEPS_PER_DEGREE), 2048 + math.ceil(high * STEPS_PER_DEGREE)
        else:
            half = math.ceil(max(-low, high) * STEPS_PER_DEGREE)
            lo, hi = 2048 - half, 2048 + half
        calibration[joint] = MotorCalibration(id=MOTOR_IDS[joint], drive_mode=0, homing_offset=0, range_min=lo,
                                              range_max=hi)
    return calibration


def steps_of(joint: str, value: float, cal: MotorCalibration) -> float:
    """A LeRobot position -> Present_Position steps, inverting LeRobot's normalization (drive mode 0)."""
    if joint == GRIPPER:
        return cal.range_min + value / 100.0 * (cal.range_max - cal.range_min)
    return (cal.range_min + cal.range_max) / 2 + value * STEPS_PER_DEGREE


def value_of(joint: str, steps: float, cal: MotorCalibration) -> float:
    """Present_Position steps -> the LeRobot position (LeRobot's normalization, drive mode 0)."""
    if joint == GRIPPER:
        return (min(max(steps, cal.range_min), cal.range_max) - cal.range_min) / (cal.range_max - cal.range_min) * 100
    return (steps - (cal.range_min + cal.range_max) / 2) / STEPS_PER_DEGREE


class TwinFeetechBus(SimFeetechBus):
    """Six simulated STS3215 servos on a pty that are the twin's joints (see the module docstring). Its joints and
    goals are exchanged by :meth:`publish` and :meth:`apply_goals`, which a :class:`TwinClock` given this bus
    calls at every physics tick (from one thread: each shared record has one writer)."""

    def __init__(self, twin: Any, calibration: Mapping[str, MotorCalibration] | None = None):
        self.twin = twin
        self.calibration = dict(calibration or twin_calibration())
        if any(c.drive_mode for c in self.calibration.values()):
            raise ValueError("twin bus: calibrations with drive_mode 1 are not supported")
        encoders, velocities = self._joints()
        self._encoders = encoders
        self._present = SharedRecord.create(encoders + velocities)
        self._goals = SharedRecord.create(encoders + [0.0] * len(JOINTS))  # torque off: the servos' power-up state
        self._applied = self._goals.read()[0]
        self._held: dict[str, float] = {}  # joint -> encoder count it holds at since its torque went off
        self._exchange = threading.Lock()  # the twin side's exchange against close (never taken by the servos)
        try:
            super().__init__(ids=[MOTOR_IDS[j] for j in JOINTS], positions=encoders)
        except BaseException:
            self._release_records()
            raise

    def _spec(self, *args) -> BusSpec:
        return replace(super()._spec(*args), twin=TwinLink(self._present.name, self._goals.name))

    def write_calibration(self, folder: str | Path, arm_id: str) -> Path:
        """The calibration file the follower must load to read this bus as the twin (``<folder>/<arm_id>.json``)."""
        from sgvla.so101.hardware.calibration import write_arm_calibration

        return write_arm_calibration(Path(folder) / f"{arm_id}.json", self.calibration)

    def _encoder_counts(self, radians: Mapping[str, float]) -> list[float]:
        """Raw encoder counts (Present_Position + homing offset) of joint positions in radians."""
        values = lerobot_of(radians)
        return [steps_of(j, values[j], self.calibration[j]) + self.calibration[j].homing_offset for j in JOINTS]

    def _joints(self) -> tuple[list[float], list[float]]:
        """The twin's joints now: encoder counts, and velocities in counts per second (the mapping is affine)."""
        positions, velocities = self.twin.joint_positions(), self.twin.joint_velocities()
        now = self._encoder_counts(positions)
        ahead = self._encoder_counts({j: positions[j] + velocities[j] for j in JOINTS})  # one second on
        return now, [b - a for a, b in zip(now, ahead, strict=True)]

    def publish(self) -> None:
        """Twin side, after a physics tick: the joints become what the servos report."""
        encoders, velocities = self._joints()
        with self._exchange:
            if not self.closed:
                self._encoders = encoders
                self._present.write(encoders + velocities)

    def apply_goals(self) -> None:
        """Twin side, before a physics tick: goals written to the servos since the last call become the joints'
        targets; a servo with torque off holds where it was when its torque went off, until torque comes back on.
        LeRobot turns torque off one servo at a time (two writes each, over several ticks): were the hold taken
        again at each later write, a joint still moving would be held where it had got to by the last one."""
        with self._exchange:
            if self.closed:
                return
            version, values = self._goals.read()
        if version == self._applied:
            return
        self._applied = version
        n = len(JOINTS)
        goals = {}
        for joint, goal, torque, present in zip(JOINTS, values[:n], values[n:], self._encoders, strict=True):
            cal = self.calibration[joint]
            if torque:
                self._held.pop(joint, None)
                encoder = goal
            else:
                encoder = self._held.setdefault(joint, min(max(present, 0.0), RESOLUTION - 1.0))
            goals[joint] = value_of(joint, encoder - cal.homing_offset, cal)
        self.twin.set_joint_targets(radians_of(goals))

    def _release_records(self) -> None:
        for record in (self._present, self._goals):
            record.close()

    def close(self) -> None:
        was_closed = self.closed
        super().close()
        if not was_closed:
            with self._exchange:
                self._release_records()


@contextlib.contextmanager
def serve_twin(task_id: int = 0, seed: int = 0, calibration_dir: str | Path = "",
               arm_id: str = "so101_follower") -> Iterator[TwinRig]:
    """The twin running in real time with its servos on a pty: what ``sgvla record --config twin`` records from.

    Writes the bus's calibration as ``<calibration_dir>/<arm_id>.json`` (a temporary folder by default)."""
    from sgvla.so101.twin.config import load_twin_config
    from sgvla.so101.twin.twin import So101Twin

    with contextlib.ExitStack() as stack:
        folder = Path(calibration_dir) if calibration_dir else Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="sgvla_twin_")))
        twin = So101Twin(load_twin_config(), task_id=task_id)
        stack.callback(twin.close)
        twin.reset(seed)
        twin.render_model  # made (or read from the cache) before cameras start, not in their first frame
        bus = stack.enter_context(TwinFeetechBus(twin))
        clock = TwinClock(twin, bus=bus).start()
        stack.callback(clock.close)  # before the bus closes
        bus.write_calibration(folder, arm_id)
        log.info("twin task %d (%r), seed %d: servos on %s", task_id, twin.task, seed, bus.port)
        yield TwinRig(twin, bus, clock, folder)


@dataclass
class TwinRig:
    twin: Any  # what cameras render from (source: twin; each camera draws on a thread of its own)
    bus: TwinFeetechBus
    clock: TwinClock
    calibration_dir: Path
