"""A simulated SO101 follower and leader on pseudo-terminals, with calibration files in a temp folder.

Each simulated bus answers from a process of its own (sgvla/so101/hardware/sim_bus.py), as real servos answer from their
own hardware: nothing the test process does (threads, garbage collection, LeRobot's busy-polling reads) delays a
reply. Each test gets its own buses, ports and folder; the fixtures close the buses and reap their processes.
"""

from dataclasses import dataclass
from pathlib import Path

import pytest

from sgvla.so101.hardware.arm import FollowerArm, LeaderArm
from sgvla.so101.hardware.calibration import write_arm_calibration
from sgvla.so101.hardware.config import ArmConfig
from sgvla.so101.hardware.safety import SafetyConfig
from sgvla.so101.hardware.sim_bus import STEPS_PER_DEGREE as DEG
from sgvla.so101.hardware.sim_bus import SimFeetechBus, SineMotion, sim_calibration

# The hand on the leader: body joints swing +-20 degrees at 1 Hz, the gripper between 20 and 80 %.
LEADER_MOTION = SineMotion(amplitude=20 * DEG, frequency_hz=1.0, gripper_range=(2200, 2800), gripper_frequency_hz=1.0)


@dataclass
class SimRig:
    follower: SimFeetechBus
    leader: SimFeetechBus
    calibration_dir: Path

    def follower_config(self, **kw) -> ArmConfig:
        return ArmConfig(port=self.follower.port, id="so101_follower", calibration_dir=str(self.calibration_dir), **kw)

    def leader_config(self, **kw) -> ArmConfig:
        return ArmConfig(port=self.leader.port, id="so101_leader", calibration_dir=str(self.calibration_dir), **kw)

    def health(self) -> dict:
        """How each bus's server kept up (for a failure's message: was it off a CPU, were replies unsent?)."""
        return {"follower": self.follower.health(), "leader": self.leader.health()}


@pytest.fixture
def rig(tmp_path):
    folder = tmp_path / "calibration"
    for arm_id in ("so101_follower", "so101_leader"):
        write_arm_calibration(folder / f"{arm_id}.json", sim_calibration())
    with SimFeetechBus() as follower, SimFeetechBus(motion=LEADER_MOTION) as leader:
        yield SimRig(follower, leader, folder)


@pytest.fixture
def follower(rig):
    arm = FollowerArm(rig.follower_config(), SafetyConfig(max_step=10.0, command_timeout_s=0.3))
    arm.connect()
    yield arm
    arm.close()


@pytest.fixture
def leader(rig):
    arm = LeaderArm(rig.leader_config())
    arm.connect()
    yield arm
    arm.close()
