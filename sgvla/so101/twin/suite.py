"""The SO101 twin suite: the real tabletop's five tasks in MuJoCo (config/twin/so101_tabletop.yaml), two identical
black bowls in each, under the perturbation sets of config/perturbations/so101_twin/.

``perception: true`` means what it means for so101_hardware: what is known of the objects is perceived from their
fiducial markers by the cameras (`sgvla.so101.twin.perceived`, the library the arm's fiducial_graphs node runs), so
policies that read the scene (prompt_grounded, expert) read the perceived objects, and the live graph is the
perceived one (``graph_source: fiducial``, which needs it; the simulator's ``ground_truth`` is refused with it). It
holds in process and over topics alike: the backend's scene is the perceived one wherever the backend runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from sgvla.core.progress import PickPlaceSpec
from sgvla.core.state import RobotState

from sgvla.eval.suite import SuiteConfig
from sgvla.so101.cameras import AGENTVIEW, WRIST
from sgvla.so101.twin.stages import so101_stages  # the SO101's stages (also the arm suite's)




@SuiteConfig.register("so101_twin")
@dataclass
class So101TwinSuite(SuiteConfig):
    """Options: ``image_size`` (square images instead of the twin config's camera size, 640x480; None keeps it: the
    size perception renders too, where markers need the pixels), ``perception`` (see the module docstring)."""

    image_size: int | None = None
    perception: bool = False

    tasks: ClassVar[tuple[int, ...]] = tuple(range(5))
    ontology: ClassVar[str] = "so101_tabletop"
    views: ClassVar[tuple[str, ...]] = (AGENTVIEW, WRIST)
    backend_modules: ClassVar[tuple[str, ...]] = ("sgvla.so101.twin.backend",)
    policy_modules: ClassVar[tuple[str, ...]] = ("sgvla.so101.twin.pick_place",)
    learned_policies: ClassVar[bool] = True  # LeRobot checkpoints trained on SO101 data (sgvla.so101.learned)

    def __post_init__(self) -> None:
        if self.image_size is not None and not 32 <= self.image_size <= 1024:
            raise ValueError(f"image_size must be within 32..1024 pixels, got {self.image_size}")

    def perturbations(self) -> list[str]:
        from sgvla.so101.twin.perturbations import available_perturbations

        return available_perturbations()

    def check_perturbations(self, name: str) -> None:
        super().check_perturbations(name)
        from sgvla.so101.twin.perturbations import load_perturbations

        load_perturbations(name)  # checked against the twin's tasks: a clear error naming the file and task

    def make_backend(self, task_id: int, perturbation: str, render_images: bool, max_steps: int | None = None):
        from sgvla.so101.twin.backend import TwinBackend

        limit = {} if max_steps is None else {"max_steps": max_steps}
        backend = TwinBackend(task_id, image_size=self.image_size, render_images=render_images,
                              perturbation=perturbation, perception=self.perception, **limit)
        spec = backend.perturbations.referring
        if spec is None:
            return backend
        from sgvla.core.referring import ReferringBackend  # every instruction a referring program (issue 42.3)

        # Made from the simulator's truth, also where the backend perceives (the task's instruction, not a percept).
        return ReferringBackend(backend, spec, task_id=task_id, tasks=len(self.tasks), view=AGENTVIEW,
                                truth=backend.twin.scene)

    def stages(self, task_id: int) -> PickPlaceSpec:
        """Every task moves the target bowl onto the place object (what `So101Twin.success` reads). With perception
        the stages are read from the perceived scene (what the system under test knew), success from the simulator."""
        return so101_stages()

    @property
    def perceives(self) -> bool:
        return self.perception

    def setup_hint(self) -> str:
        return "" if self.perception else " (set suite.perception=true: the twin's cameras read the objects' markers)"

    def controller_factory(self):
        """The twin's pick-and-place on a model of its own: scripted policies drive it from the scene topic."""
        from sgvla.so101.twin.pick_place import controller_factory

        return controller_factory()

    demo_image_size: ClassVar[tuple[int, int] | None] = (128, 96)

    def generate_demos(self, tasks: list[int], episodes: int, out: Path, *, image_size: tuple[int, int],
                       perturbation: str, max_attempts: int | None, max_steps: int | None) -> list[Path]:
        """One LeRobot dataset at `out` with the features `sgvla record` writes on the arm (ready for
        ``lerobot-train``)."""
        from sgvla.so101.twin.demos import generate

        return [generate(tasks, episodes, out, image_size=image_size, perturbation=perturbation,
                         max_attempts=max_attempts, max_steps=max_steps)]

    def lerobot_env_config(self) -> Any:
        """Checkpoints on the SO101 load by the features of the data they were trained on (sgvla.so101.learned)."""
        from sgvla.so101.learned import So101Embodiment

        return So101Embodiment()

    def observation(self, robot: RobotState, images: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """The twin backend's raw observation: joint positions (JOINTS order) and the upright camera images."""
        from sgvla.so101.hardware.joints import JOINTS

        return {"agent_pos": robot.of(JOINTS)[0], "pixels": dict(images)}
