"""A simulated SO101 leader arm for LeRobot's own ``so101_leader`` teleoperator, on a pseudo-terminal.

sgvla's simulated Feetech bus (`sgvla.so101.hardware.sim_bus`: six STS3215 servos answered by a process of their own,
their joints swung by a slow sine as a hand would, ``sgvla record --sim-leader``'s leader) is served on a pty that
``--teleop.type=so101_leader --teleop.port=<pty>`` opens as the USB adapter of a real leader: the same command a user
with a real leader types, and the same LeRobot code reading it.

One difference from `sgvla sim-bus`: the calibration is also written into the servos, as a real leader's EEPROM
keeps it after ``lerobot-calibrate``; LeRobot's leader then finds motors and calibration file agreeing and connects
without asking to press ENTER (a run without a terminal, a test, could not answer).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ID = "so101_leader"


@dataclass(frozen=True)
class SimLeader:
    port: str  # --teleop.port
    calibration_dir: Path  # --teleop.calibration_dir
    arm_id: str  # --teleop.id

    def teleop_args(self) -> list[str]:
        """LeRobot's command-line arguments for this leader."""
        return ["--teleop.type=so101_leader", f"--teleop.port={self.port}", f"--teleop.id={self.arm_id}",
                f"--teleop.calibration_dir={self.calibration_dir}"]


def write_calibration_to_servos(port: str, calibration: dict) -> None:
    """Write ``calibration`` into the servos on ``port`` through LeRobot's Feetech bus (what LeRobot's calibrate
    does after its prompts)."""
    from lerobot.motors import Motor, MotorNormMode
    from lerobot.motors.feetech import FeetechMotorsBus

    from sgvla.so101.hardware.joints import GRIPPER, JOINTS, MOTOR_IDS

    motors = {j: Motor(MOTOR_IDS[j], "sts3215", MotorNormMode.RANGE_0_100 if j == GRIPPER else MotorNormMode.DEGREES)
              for j in JOINTS}
    bus = FeetechMotorsBus(port=port, motors=motors, calibration=calibration)
    bus.connect()
    try:
        bus.write_calibration(calibration)
    finally:
        bus.disconnect(disable_torque=False)


@contextlib.contextmanager
def serve_sim_leader(calibration_dir: str | Path, arm_id: str = DEFAULT_ID) -> Iterator[SimLeader]:
    """A simulated leader on a pty, calibrated (servos and ``<calibration_dir>/<arm_id>.json``), for the block.

    Start it from a thread that outlives it (sgvla's sim bus dies with the thread that started it)."""
    from sgvla.so101.hardware.calibration import write_arm_calibration
    from sgvla.so101.hardware.sim_bus import LEADER_MOTION, SimFeetechBus, sim_calibration

    calibration = sim_calibration()
    folder = Path(calibration_dir)
    with SimFeetechBus(motion=LEADER_MOTION) as bus:
        write_calibration_to_servos(bus.port, calibration)
        write_arm_calibration(folder / f"{arm_id}.json", calibration)
        yield SimLeader(bus.port, folder, arm_id)
