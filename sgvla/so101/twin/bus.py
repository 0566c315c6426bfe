"""The SO101 MuJoCo twin behind the interfaces of the real arm: in process, and as a Feetech bus on a pty.

- :class:`TwinArm`: :class:`~sgvla.so101.hardware.arm.FollowerArm` whose device is the twin, so every goal takes the
  real arm's code path (safe_goal limits, per-tick bound, Watchdog hold); used by the ``so101_twin`` node.
- :class:`TwinFeetechBus`: a :class:`~sgvla.so101.hardware.sim_bus.SimFeetechBus` whose six servos are the twin's
  joints. Present_Position is the twin's joint, in encoder steps through the calibration exactly as LeRobot
  reads it (degrees mode about the range middle; the gripper's 0..100 % over its range, mapped onto the URDF
  gripper limits); a Goal_Position written with torque on becomes the twin's joint target. LeRobot's
  SO101Follower talks to it unchanged (``sgvla record --config twin``).
- :class:`TwinClock`: a thread advancing the twin's physics in real time at its control period.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lerobot.motors import MotorCalibration

from sgvla.so101.hardware.arm import FollowerArm
from sgvla.so101.hardware.config import ArmConfig
from sgvla.so101.hardware.joints import GRIPPER, JOINTS, MOTOR_IDS, URDF_LIMITS, action_key, from_radians, to_radians
from sgvla.so101.hardware.safety import SafetyConfig
from sgvla.so101.hardware.sim_bus import RESOLUTION, STEPS_PER_DEGREE, SYNC_WRITE, WRITE, SimFeetechBus

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
    """Advances the twin's physics in real time, one control period per tick, on a thread of its own.

    After a stall (a slow render, a save) it catches up by at most ``max_catch_up_s`` at once; the
    time it could not catch up is counted in ``lag_s``."""

    def __init__(self, twin: Any, max_catch_up_s: float = 0.25):
        self.twin, self.max_catch_up_s = twin, max_catch_up_s
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
            self.twin.advance(step)
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
    """Six simulated STS3215 servos on a pty that are the twin's joints (see the module docstring)."""

    def __init__(self, twin: Any, calibration: Mapping[str, MotorCalibration] | None = None):
        self.twin = twin
        self.calibration = dict(calibration or twin_calibration())
        if any(c.drive_mode for c in self.calibration.values()):
            raise ValueError("twin bus: calibrations with drive_mode 1 are not supported")
        super().__init__(ids=[MOTOR_IDS[j] for j in JOINTS], positions=self._encoders())

    def write_calibration(self, folder: str | Path, arm_id: str) -> Path:
        """The calibration file the follower must load to read this bus as the twin (``<folder>/<arm_id>.json``)."""
        from sgvla.so101.hardware.calibration import write_arm_calibration

        return write_arm_calibration(Path(folder) / f"{arm_id}.json", self.calibration)

    def _encoders(self) -> list[float]:
        """Raw encoder counts (Present_Position + homing offset) of the twin's joints now."""
        now = lerobot_of(self.twin.joint_positions())
        return [steps_of(j, now[j], self.calibration[j]) + self.calibration[j].homing_offset for j in JOINTS]

    def _advance(self) -> None:
        """Servos read the twin: encoders are its joints, velocities their change since the last packet."""
        now = time.monotonic()
        for servo, encoder in zip(self.servos.values(), self._encoders(), strict=True):
            dt, servo._t = now - servo._t, now
            velocity = (encoder - servo.encoder) / dt if dt > 0 else 0.0
            servo.encoder = min(max(encoder, 0.0), RESOLUTION - 1.0)
            servo._refresh(velocity)

    def _handle(self, motor_id: int, instruction: int, params: bytes) -> list[bytes]:
        replies = super()._handle(motor_id, instruction, params)
        if instruction in (WRITE, SYNC_WRITE):  # goals (and torque) go to the twin as joint targets
            goals = {}
            for joint, servo in zip(JOINTS, self.servos.values(), strict=True):
                cal = self.calibration[joint]
                steps = servo.goal_encoder() - cal.homing_offset if servo.get("Torque_Enable") else servo.encoder
                goals[joint] = value_of(joint, steps, cal)
            self.twin.set_joint_targets(radians_of(goals))
        return replies


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
        clock = TwinClock(twin).start()
        stack.callback(clock.close)
        bus = stack.enter_context(TwinFeetechBus(twin))
        bus.write_calibration(folder, arm_id)
        log.info("twin task %d (%r), seed %d: servos on %s", task_id, twin.task, seed, bus.port)
        yield TwinRig(twin, bus, clock, folder)


@dataclass
class TwinRig:
    twin: Any  # what cameras render from (source: twin; each camera draws on a thread of its own)
    bus: TwinFeetechBus
    clock: TwinClock
    calibration_dir: Path
