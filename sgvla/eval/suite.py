"""Task suites: what an evaluation plan runs its episodes on, one registered choice per embodiment's suite.

A suite knows its task ids, the ontology its objects are named in, the camera views a graph can describe, the
perturbations it understands, its step limit, and how to build the backend of one task; the runner and the ROS
environment node ask the plan's suite and never test which suite it is. Suites register in their embodiment's
package (``sgvla.libero.suite``, ``sgvla.so101.twin.suite``); ``sgvla.plugins`` imports them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from collections.abc import Callable, Mapping

import numpy as np

from sgvla.core.progress import PickPlaceSpec
from sgvla.core.protocols import Backend
from sgvla.core.registry import Choice
from sgvla.core.state import RobotState


@dataclass
class SuiteConfig(Choice, kind="suite"):
    """Base of the registered suites; options are the subclass's fields (e.g. LIBERO's render profile)."""

    tasks: ClassVar[tuple[int, ...]] = ()
    ontology: ClassVar[str] = ""
    views: ClassVar[tuple[str, ...]] = ()  # cameras a plan may take the graph of; the first is a plan's default view
    default_perturbations: ClassVar[str] = "none"  # the perturbation set a plan that names none runs
    # Modules a node graph imports at start, in parallel, rather than at the first episode: its backend's
    # (sim_bridge) and its policies' (vla_policy: the scripted controller).
    backend_modules: ClassVar[tuple[str, ...]] = ()
    policy_modules: ClassVar[tuple[str, ...]] = ()
    cameras: ClassVar[tuple[str, ...]] = ()  # cameras its backend renders unless a perturbation says otherwise; ()
    # means all its views. The node graph creates their topics and subscribes a learned policy to them.
    learned_policies: ClassVar[bool] = True  # whether LeRobot checkpoints can act on it
    image_graph_sources: ClassVar[bool] = True  # whether graph sources that look at images (VLM) work on it
    graph_modes: ClassVar[bool] = True  # whether a graph source can give it a live graph (modes that read one)
    privileged_scene: ClassVar[bool] = True  # whether it knows where the objects are (policies that read the scene)
    in_process: ClassVar[bool] = True  # whether `sgvla eval` can run it in process (a physical arm runs over topics)
    images_rotated_180: ClassVar[bool] = False  # its backend stores camera images turned 180 degrees (LIBERO's)

    def upright(self, image: np.ndarray) -> np.ndarray:
        """A camera image of this suite's backend turned upright (row 0 at the top), as cameras, datasets and VLMs
        hold images: the one place `images_rotated_180` is applied to an image in process (a view, never a copy)."""
        return image[::-1, ::-1] if self.images_rotated_180 else image

    @property
    def knows_objects(self) -> bool:
        """Whether policies that read object positions (the scene) can run on it: the privileged scene, or
        perception."""
        return self.privileged_scene

    @property
    def perceives(self) -> bool:
        """Whether what is known of its objects is perceived (the SO101 suites' ``perception: true``: fiducial
        markers): policies that read the scene read the perceived objects, and graphs come from the perceived objects
        (a graph source that reads the simulator's geometry cannot run on it; the ``fiducial`` source needs it)."""
        return False

    def setup_hint(self) -> str:
        """How to give it what a refused plan asks for (a live graph, object positions), or empty."""
        return ""

    def perturbations(self) -> list[str] | None:
        """The perturbation names this suite understands; None: any file of config/perturbations."""
        return None

    def check_perturbations(self, name: str) -> None:
        """Fail (ValueError naming the valid ones) unless `name` is a perturbation this suite can apply."""
        valid = self.perturbations()
        if valid is not None and name not in valid:
            raise ValueError(f"perturbations {name!r} are not supported by the {self.type} suite; it supports {valid}")

    def make_backend(self, task_id: int, perturbation: str, render_images: bool, max_steps: int | None = None
                     ) -> Backend:
        """The backend of one task; it ends episodes at `max_steps` (None: the suite's limit)."""
        raise NotImplementedError

    def stages(self, task_id: int) -> PickPlaceSpec | None:
        """How the progress of a task's episodes is read from its scenes (`sgvla.core.progress`: the embodiment's
        thresholds; target and place come from the task's goal); None: no scene to read it from (unknown)."""
        return None

    @classmethod
    def rendered(cls) -> tuple[str, ...]:
        """The cameras its backend renders unless a perturbation says otherwise."""
        return cls.cameras or cls.views

    def cameras_of(self, task_id: int, perturbation: str) -> tuple[str, ...]:
        """The cameras a task renders under a perturbation (the views whose images exist)."""
        return self.rendered()

    def record_facts(self) -> dict[str, Any]:
        """Settings every episode record of this suite carries (e.g. the render profile)."""
        return {}

    def observation(self, robot: RobotState, images: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """The raw observation a backend of this suite returns, rebuilt from what a robot publishes (joint states,
        end effector, camera images in the backend's convention, in its camera order): what learned policies read
        when they run over topics."""
        raise NotImplementedError(f"the {self.type} suite cannot feed policies from topics")

    def controller_factory(self) -> Callable[[str, str], Any] | None:
        """The pick-and-place controller scripted policies drive, where it needs no simulator handle (so a policy
        node can make it from topics); None otherwise."""
        return None

    # Scripted-expert demonstrations (`sgvla demos generate`): the image size a suite's demos default to, or None
    # for a suite that writes none.
    demo_image_size: ClassVar[tuple[int, int] | None] = None

    def generate_demos(self, tasks: list[int], episodes: int, out: Path, *, image_size: tuple[int, int],
                       perturbation: str, max_attempts: int | None, max_steps: int | None) -> list[Path]:
        """`episodes` successful scripted demos of each task into `out` (resumed where it stopped), in the suite's
        own demo format; the paths written. ValueError for settings the suite's demos cannot take."""
        raise NotImplementedError(f"the {self.type} suite writes no demos")

    def lerobot_env_config(self) -> Any:
        """LeRobot's env config for learned policies on this suite (their processors read it); None: none."""
        return None

