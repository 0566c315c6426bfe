"""``--robot.type=so101_twin``: sgvla's SO101 MuJoCo twin as a LeRobot robot (see so101_twin.py for the robot).

Everything here is a plain number or name, so LeRobot's command line (draccus) takes each option as
``--robot.<field>=<value>``. The numbers are checked here, before LeRobot creates a dataset or connects a
teleoperator; the task id and the perturbation set are checked against the twin's config when the robot is made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lerobot.robots.config import RobotConfig

from sgvla.so101.hardware.joints import JOINTS

MAX_IMAGE_SIDE = 1024


@RobotConfig.register_subclass("so101_twin")
@dataclass
class SO101TwinConfig(RobotConfig):
    # Task of sgvla's twin (config/twin/so101_tabletop.yaml, tasks 0..4) and the seed of its scene reset (object
    # position noise).
    task_id: int = 0
    seed: int = 0
    # Control rate: every send_action advances the twin's physics by 1/fps seconds (lockstep, so a slow loop slows
    # the simulation instead of skipping physics). Give LeRobot's loop the same rate: --dataset.fps (default 30) for
    # lerobot-record, --fps for lerobot-teleoperate and lerobot-rollout.
    fps: int = 30
    # Size of both cameras' images, ``agentview`` and ``wrist`` as on the rig (its RealSense and wrist camera give
    # 640x480; rendering on a CPU is cheaper smaller).
    image_width: int = 320
    image_height: int = 240
    # Also ``agentview_depth``: (h, w, 1) uint16 millimetres, as the rig's RealSense (LeRobot's use_depth) gives it.
    depth: bool = False
    # As LeRobot's SO101 follower: a goal is first clipped into the joint limits (the URDF's, in LeRobot units),
    # then to at most this far from the present position per send_action (degrees; gripper %); a number for every
    # joint, or a {joint: value} map of all six; null for no bound (limits still apply). 8 is sgvla's rig's max_step.
    max_relative_target: float | dict[str, float] | None = 8.0
    # A twin config YAML ("" = sgvla's config/twin/so101_tabletop.yaml) and a perturbation set (a name in
    # config/perturbations/so101_twin/ or a path; "none" = the tasks as configured).
    twin_config: str = ""
    perturbation: str = "none"
    # Also put ``task_success`` (1.0 once the target bowl rests on the place object, else 0.0) in every observation
    # dict, beside the declared features: LeRobot's display (--display_data=true) plots it, datasets and policies
    # never see it (they take only declared features). The robot's ``task_success`` property is always there.
    success_in_observation: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.fps <= 0:
            raise ValueError(f"so101_twin: fps must be a positive number of control steps per second, got {self.fps}")
        for name in ("image_width", "image_height"):
            value = getattr(self, name)
            if not 16 <= value <= MAX_IMAGE_SIDE:
                raise ValueError(f"so101_twin: {name} must be within 16..{MAX_IMAGE_SIDE} pixels, got {value}")
        if self.task_id < 0:
            raise ValueError(f"so101_twin: task_id must be >= 0, got {self.task_id}")
        self.max_step_per_joint()  # a clear error now, not at the first action

    def max_step_per_joint(self) -> dict[str, float]:
        """``max_relative_target`` as a bound per joint (inf for none)."""
        bound = self.max_relative_target
        if bound is None:
            return dict.fromkeys(JOINTS, math.inf)
        if isinstance(bound, dict):
            if set(bound) != set(JOINTS):
                raise ValueError(f"so101_twin: max_relative_target as a map needs exactly the joints {list(JOINTS)}, "
                                 f"got {sorted(bound)}")
            steps = {j: float(bound[j]) for j in JOINTS}
        else:
            steps = dict.fromkeys(JOINTS, float(bound))
        bad = sorted(j for j, v in steps.items() if not v > 0)
        if bad:
            raise ValueError(f"so101_twin: max_relative_target must be > 0 (or null for no bound); "
                             f"not for {bad}: {bound}")
        return steps
