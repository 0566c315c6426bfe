"""The LIBERO-Spatial suite: ten tasks of the Panda picking a black bowl, the paper's benchmark."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from sgvla.core.progress import PickPlaceSpec
from sgvla.core.state import RobotState
from sgvla.eval.suite import SuiteConfig
from sgvla.libero.cameras import CAMERAS, DEFAULT_CAMERAS
from sgvla.libero.stages import PANDA_STAGES  # the Panda's stages (sgvla.core.progress)

IMAGE_SIZES = (32, 1024)  # pixels, inclusive: what the renderer was run at (policies are trained at 128-256)


@SuiteConfig.register("libero_spatial")
@dataclass
class LiberoSpatialSuite(SuiteConfig):
    """Options: ``render_profile`` (``reference``: what learned policies were trained on, bit-identical to
    LeRobot's env; ``fast``: cheaper software rendering for scripted and regression runs), ``image_size``, and
    ``lean_step`` (default on: sgvla.libero.stepping, the same results bit for bit; off steps LeRobot's env as it
    comes, for comparisons)."""

    images_rotated_180: ClassVar[bool] = True  # rows bottom-up, as LeRobot's LIBERO env gives them to policies
    render_profile: Literal["reference", "fast"] = "reference"
    image_size: int = 256
    lean_step: bool = True

    tasks: ClassVar[tuple[int, ...]] = tuple(range(10))
    ontology: ClassVar[str] = "libero_spatial"
    views: ClassVar[tuple[str, ...]] = CAMERAS  # graphs project into any scene camera of LIBERO
    cameras: ClassVar[tuple[str, ...]] = DEFAULT_CAMERAS
    default_perturbations: ClassVar[str] = "table7"  # the paper's perturbation set of LIBERO-Spatial
    backend_modules: ClassVar[tuple[str, ...]] = ("sgvla.libero.env",)
    policy_modules: ClassVar[tuple[str, ...]] = ("sgvla.libero.expert",)

    def __post_init__(self) -> None:
        low, high = IMAGE_SIZES
        if not low <= self.image_size <= high:
            raise ValueError(f"image_size must be within {low}..{high} pixels, got {self.image_size}")

    def check_perturbations(self, name: str) -> None:
        from sgvla.libero.perturbations import load_perturbations

        load_perturbations(name)  # a clear error naming the file and the available ones

    def make_backend(self, task_id: int, perturbation: str, render_images: bool, max_steps: int | None = None):
        from sgvla.libero.env import make_backend

        limit = {} if max_steps is None else {"max_steps": max_steps}
        backend = make_backend(task_id, render_profile=self.render_profile, perturbation=perturbation,
                               image_size=self.image_size, render_images=render_images, lean_step=self.lean_step,
                               **limit)
        spec = backend.perturbations.referring
        if spec is None:
            return backend
        from sgvla.core.referring import ReferringBackend  # every instruction a referring program (issue 42.3)

        return ReferringBackend(backend, spec, task_id=task_id, tasks=len(self.tasks), view=backend.cameras[0])

    def stages(self, task_id: int) -> PickPlaceSpec:
        """Every task moves a bowl onto the plate (the BDDL goal the success check reads): the Panda's stages."""
        return PANDA_STAGES

    def cameras_of(self, task_id: int, perturbation: str) -> tuple[str, ...]:
        from sgvla.libero.perturbations import load_perturbations

        return load_perturbations(perturbation).for_task(task_id).cameras or self.rendered()

    def record_facts(self) -> dict[str, Any]:
        return {"render_profile": self.render_profile}

    def observation(self, robot: RobotState, images: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """LeRobot's LiberoEnv raw observation (``pixels_agent_pos``): the first two cameras as ``image`` and
        ``image2`` (stored convention), and ``robot_state`` from the Panda's joints (arm, then ``gripper*``
        fingers) and end effector; the rotation matrix is computed from the quaternion (policies read position,
        quaternion and finger positions)."""
        arm = [n for n in robot.names if not n.startswith("gripper")]
        fingers = [n for n in robot.names if n.startswith("gripper")]
        (arm_q, arm_v), (finger_q, finger_v) = robot.of(arm), robot.of(fingers)
        if robot.eef_position is None or robot.eef_quaternion is None:
            raise ValueError("LIBERO's policies read the end effector's pose; the robot state has none")
        pixels = dict(zip(("image", "image2"), images.values()))
        return {"pixels": pixels, "robot_state": {
            "eef": {"pos": np.asarray(robot.eef_position, np.float64),
                    "quat": np.asarray(robot.eef_quaternion, np.float64),
                    "mat": quaternion_matrix(robot.eef_quaternion)},
            "gripper": {"qpos": finger_q, "qvel": finger_v},
            "joints": {"pos": arm_q, "vel": arm_v}}}

    def controller_factory(self):
        from sgvla.libero.expert import PickPlaceController

        return PickPlaceController

    demo_image_size: ClassVar[tuple[int, int] | None] = (128, 128)

    def generate_demos(self, tasks: list[int], episodes: int, out: Path, *, image_size: tuple[int, int],
                       perturbation: str, max_attempts: int | None, max_steps: int | None) -> list[Path]:
        """LIBERO's HDF5 layout, one ``<task>_demo.hdf5`` per task in `out` (or `out` itself for one task), rendered
        with this suite's render profile."""
        width, height = image_size
        if width != height or max_steps is not None:
            raise ValueError("libero_spatial demos have square images (--image-size N) and the task's own step "
                             "limit (--max-steps is not theirs)")
        from sgvla.libero.demos import generate

        return generate(tasks, episodes, out, render_profile=self.render_profile, image_size=width,
                        perturbation=perturbation, max_attempts=max_attempts)

    def lerobot_env_config(self) -> Any:
        from sgvla.policies.lerobot_vla import libero_env_config

        return libero_env_config(observation_height=self.image_size, observation_width=self.image_size)


def quaternion_matrix(q) -> np.ndarray:
    """Rotation matrix of a unit quaternion (x, y, z, w)."""
    x, y, z, w = np.asarray(q, np.float64)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
