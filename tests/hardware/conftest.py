"""A simulated SO101 follower and leader on pseudo-terminals, with calibration files in a temp folder.

The simulated servos answer from a thread of the test process, while scservo_sdk busy-polls the
port from another: with Python's default 5 ms GIL switch interval a reply can queue behind several
hand-overs and miss LeRobot's 50 ms packet timeout on a loaded machine. Real servos answer from
their own hardware, so the tests give the reply thread the GIL sooner instead.
"""

import gc
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sgvla.so101.hardware.arm import FollowerArm, LeaderArm
from sgvla.so101.hardware.calibration import write_arm_calibration
from sgvla.so101.hardware.config import ArmConfig
from sgvla.so101.hardware.safety import SafetyConfig
from sgvla.so101.hardware.sim_bus import STEPS_PER_DEGREE as DEG
from sgvla.so101.hardware.sim_bus import SimFeetechBus, sim_calibration

sys.setswitchinterval(1e-4)


def leader_motion(t: float) -> list[float]:
    """The hand on the leader: body joints swing +-20 degrees at 1 Hz, the gripper between 20 and 80 %."""
    body = [2048 + 20 * DEG * math.sin(2 * math.pi * t + i) for i in range(5)]
    return body + [2500 + 300 * math.sin(2 * math.pi * t)]


@dataclass
class SimRig:
    follower: SimFeetechBus
    leader: SimFeetechBus
    calibration_dir: Path

    def follower_config(self, **kw) -> ArmConfig:
        return ArmConfig(port=self.follower.port, id="so101_follower", calibration_dir=str(self.calibration_dir), **kw)

    def leader_config(self, **kw) -> ArmConfig:
        return ArmConfig(port=self.leader.port, id="so101_leader", calibration_dir=str(self.calibration_dir), **kw)


@pytest.fixture
def rig(tmp_path):
    folder = tmp_path / "calibration"
    for arm_id in ("so101_follower", "so101_leader"):
        write_arm_calibration(folder / f"{arm_id}.json", sim_calibration())
    with SimFeetechBus() as follower, SimFeetechBus(motion=leader_motion) as leader:
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


@pytest.fixture(autouse=True)
def collect_garbage_first():
    """Finalizers of earlier tests' LeRobot datasets must not run in the middle of a bus exchange."""
    gc.collect()
