"""``SO101Twin``: sgvla's SO101 MuJoCo twin (`sgvla.so101.twin.twin.So101Twin`) behind LeRobot's ``Robot`` API,
with exactly the features of LeRobot's ``so101_follower``, so that a dataset or policy made on the physical arm fits
the twin and the other way round:

- ``shoulder_pan.pos`` ... ``gripper.pos`` (observation and action, floats) in the units of LeRobot's SO101 with
  ``use_degrees=True`` (its default): degrees about the calibrated middle of each joint's range, the gripper
  0..100 % of its range (`sgvla.so101.hardware.joints`, the mapping the twin's simulated Feetech bus uses too);
- the rig's cameras ``agentview`` and ``wrist`` as (h, w, 3) uint8 RGB images, optionally ``agentview_depth``
  (h, w, 1) uint16 millimetres as the rig's RealSense gives it; so datasets get ``observation.state`` (6),
  ``action`` (6) and ``observation.images.<camera>``, as ``sgvla record`` writes them on the arm.

Time is lockstep: each ``send_action`` holds its goals for one control period (1/``fps`` s of physics), and
``get_observation`` renders the state reached. A loop slower than ``fps`` (a loaded CPU) therefore slows the
simulation down instead of dropping physics, and a dataset's frames are always 1/fps of twin time apart.

``send_action`` applies the arm's safety as the physical follower does with ``max_relative_target``: each goal is
clipped into the joint limits, then to at most ``max_relative_target`` from the present position; it returns the
goals actually applied. Non-finite goals or unknown joints are refused whole.

Success. LeRobot's record and rollout loops carry no success signal: a dataset stores only the declared features
(an extra float feature would land inside ``observation.state`` and break the SO101's 6-D state), and episodes end
by time or keys. So success is where LeRobot code can read it without changing the features: the robot's
``task_success`` property (the twin's judge: the target bowl rests on the place object, released), and, with
``success_in_observation`` (default), an undeclared ``task_success`` key (1.0 / 0.0) in every observation dict, which
LeRobot's ``--display_data`` plots and ``build_dataset_frame`` leaves out.

The scene resets (seeded) at ``connect``; LeRobot's loops never reset a robot between episodes (on the real table a
person does, in the reset phase), so the objects stay where an episode left them unless a script calls
:meth:`SO101Twin.reset`.
"""

from __future__ import annotations

import logging
import atexit
import math
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from lerobot.robots.robot import Robot
from lerobot.utils.decorators import check_if_already_connected, check_if_not_connected

from sgvla.so101.cameras import AGENTVIEW, WRIST
from sgvla.so101.hardware.joints import JOINTS, action_key
from sgvla.so101.hardware.safety import SafetyConfig, safe_goal
from sgvla.so101.twin.bus import lerobot_of, radians_of
from sgvla.so101.twin.config import DEFAULT_CONFIG, load_twin_config
from sgvla.so101.twin.perturbations import load_perturbations

from .config_so101_twin import SO101TwinConfig

logger = logging.getLogger(__name__)

SUCCESS_KEY = "task_success"
PACE_CHECK_AFTER = 60  # send_action calls before the loop's pace is compared with fps (once per connection)
DEPTH_SUFFIX = "_depth"  # LeRobot's SO follower names a depth stream <camera>_depth


@dataclass(frozen=True)
class TwinCamera:
    """One of the twin's cameras as the robot serves it (LeRobot's loops size their image writers by
    ``len(robot.cameras)``)."""

    name: str
    width: int
    height: int
    depth: bool = False

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.height, self.width, 3)


class SO101Twin(Robot):
    """See the module docstring."""

    config_class = SO101TwinConfig
    name = "so101_twin"

    def __init__(self, config: SO101TwinConfig):
        super().__init__(config)
        self.config = config
        # The twin's config sized for these images (the render buffer must hold them), the task and perturbation
        # checked now: a clear error before LeRobot creates a dataset or connects a teleoperator.
        path = config.twin_config or DEFAULT_CONFIG
        self.twin_config = load_twin_config(path, {"image_width": config.image_width,
                                                   "image_height": config.image_height})
        self.twin_config.task(config.task_id)
        self._perturbations = load_perturbations(config.perturbation, self.twin_config)
        self.layout = self._perturbations.layout(self.twin_config, config.task_id)
        self.cameras = {cam: TwinCamera(cam, config.image_width, config.image_height, config.depth and cam == AGENTVIEW)
                        for cam in (AGENTVIEW, WRIST)}
        self._max_step = config.max_step_per_joint()
        self._safety = SafetyConfig()  # the URDF's joint limits in LeRobot units, as sgvla's rig uses them
        self.seed = config.seed
        self.twin = None  # sgvla's So101Twin while connected

    # -- features -------------------------------------------------------------------------------

    @property
    def _motors_ft(self) -> dict[str, type]:
        return {action_key(j): float for j in JOINTS}

    @property
    def _cameras_ft(self) -> dict[str, tuple]:
        features: dict[str, tuple] = {}
        for cam in self.cameras.values():
            features[cam.name] = cam.shape
            if cam.depth:
                features[cam.name + DEPTH_SUFFIX] = (cam.height, cam.width, 1)
        return features

    @cached_property
    def observation_features(self) -> dict[str, type | tuple]:
        return {**self._motors_ft, **self._cameras_ft}

    @cached_property
    def action_features(self) -> dict[str, type]:
        return self._motors_ft

    @property
    def task(self) -> str:
        """The task's prompt (give it to LeRobot as --dataset.single_task / --task)."""
        return self.layout.prompt

    # -- connection -----------------------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self.twin is not None

    @check_if_already_connected
    def connect(self, calibrate: bool = True) -> None:
        """Build the twin's scene (MuJoCo model, render meshes) and reset it with ``seed``."""
        from sgvla.so101.twin.twin import So101Twin as MujocoTwin

        twin = MujocoTwin(self.twin_config, self.config.task_id, self.layout)
        try:
            twin.reset(self.seed)
            for cam in self.cameras.values():  # render meshes and OpenGL contexts made now, not in the first frame
                twin.render(cam.name, cam.width, cam.height)
                if cam.depth:
                    twin.render_depth(cam.name, cam.width, cam.height)
        except BaseException:
            twin.close()
            raise
        self._pace = (0, time.monotonic())  # (send_action calls, when the first came)
        self.twin = twin
        # Closed at the latest when the interpreter exits, before MuJoCo's EGL display goes (its exit hook, made
        # with the first context above, runs after this later one): a script that stops on an error without
        # disconnecting (LeRobot's do) would otherwise leave the renderers to a teardown where freeing them fails.
        atexit.register(twin.close)
        logger.info("%s connected: twin task %d (%r), seed %d, perturbation %s, %d Hz", self, self.config.task_id,
                    self.task, self.seed, self.config.perturbation, self.config.fps)

    @property
    def is_calibrated(self) -> bool:
        return True  # a simulated arm reads its joints exactly

    def calibrate(self) -> None:
        pass

    def configure(self) -> None:
        pass

    @check_if_not_connected
    def reset(self, seed: int | None = None) -> None:
        """Put the scene back (objects with seeded noise, arm at rest); ``seed`` None takes the next seed."""
        self.seed = self.seed + 1 if seed is None else int(seed)
        self.twin.reset(self.seed)

    @check_if_not_connected
    def disconnect(self) -> None:
        twin, self.twin = self.twin, None
        atexit.unregister(twin.close)
        twin.close()
        logger.info("%s disconnected.", self)

    # -- observation and action -----------------------------------------------------------------

    def _present(self) -> dict[str, float]:
        """The joints now in LeRobot units, by joint name."""
        return lerobot_of(self.twin.joint_positions())

    @check_if_not_connected
    def get_observation(self) -> dict[str, Any]:
        twin = self.twin
        with twin.lock:  # every value of one physics instant
            obs: dict[str, Any] = {action_key(j): v for j, v in self._present().items()}
            for cam in self.cameras.values():
                obs[cam.name] = twin.render(cam.name, cam.width, cam.height)
                if cam.depth:
                    obs[cam.name + DEPTH_SUFFIX] = _depth_to_mm(twin.render_depth(cam.name, cam.width, cam.height))
            if self.config.success_in_observation:
                obs[SUCCESS_KEY] = float(twin.success())
        return obs

    @property
    def task_success(self) -> bool:
        """Whether the twin's task is solved now (False while disconnected)."""
        return self.twin is not None and self.twin.success()

    @check_if_not_connected
    def send_action(self, action: dict[str, Any]) -> dict[str, float]:
        """Apply the ``<joint>.pos`` goals (any subset; other keys are ignored, as the SO follower does) for one
        control period; returns the goals applied after the safety clipping."""
        goal = {key.removesuffix(".pos"): float(value) for key, value in action.items() if key.endswith(".pos")}
        present = self._present()
        safe = {}
        for joint, target in goal.items():  # safe_goal refuses unknown joints and non-finite goals, naming them
            step = self._max_step.get(joint, math.inf)
            safe.update(safe_goal({joint: target}, present, self._safety, max_step=step))
        self.twin.set_joint_targets(radians_of(safe))
        self.twin.advance(1.0 / self.config.fps)
        self._check_pace()
        return {action_key(j): v for j, v in safe.items()}

    def _check_pace(self) -> None:
        """Warn once when actions come much faster than ``fps`` (lerobot-teleoperate's --fps defaults to 60): each
        still advances 1/fps s of physics, so the twin runs faster than real time."""
        calls, first = self._pace
        calls += 1
        self._pace = (calls, first if calls > 1 else time.monotonic())
        if calls == PACE_CHECK_AFTER + 1:
            rate = PACE_CHECK_AFTER / max(time.monotonic() - self._pace[1], 1e-6)
            if rate > 1.5 * self.config.fps:
                logger.warning("%s: actions come at %.0f Hz but each advances 1/%d s of physics, so the twin runs "
                               "%.1fx real time; give the loop the robot's rate (--fps=%d, or --robot.fps=%.0f)",
                               self, rate, self.config.fps, rate / self.config.fps, self.config.fps, rate)


def _depth_to_mm(metres: np.ndarray) -> np.ndarray:
    """(H, W) metres -> (H, W, 1) uint16 millimetres, as sgvla's twin camera source and a RealSense give depth."""
    from sgvla.so101.hardware.cameras import depth_to_mm

    return depth_to_mm(metres)
