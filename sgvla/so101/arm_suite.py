"""The SO101 hardware suite: the twin's five tabletop tasks on the physical arm, judged by an operator.

The tasks and perturbation sets are the twin's (config/twin/so101_tabletop.yaml, config/perturbations/so101_twin/):
the operator sets the real scene as the task and perturbation describe. Episodes run over the arm's topics only
(`sgvla launch so101_eval`, the `arm_policy` node): the arm returns home at bounded speed, the operator confirms the
scene, the policy runs until the time limit or an operator stop, and the operator's verdict is the result
(`sgvla.so101.hardware.protocol`). Without perception nothing knows where the objects are, so plans run the
standard mode (graph modes are refused when the plan loads) with policies that read joint states (`hold`) or
LeRobot checkpoints trained on SO101 data (act, smolvla, pi0, pi05, lerobot: they read the joint states and the
rig cameras' images the checkpoint names; `sgvla.so101.learned`). With
``perception: true`` (and `sgvla launch so101_eval perception=true`, which starts `fiducial_graphs`) the live graph of
graph modes is the perceived one (``scene_graph/<view>``; the plan's ``graph_source: fiducial``) and policies that
read the scene (expert, prompt_grounded) read the perceived objects (``perception/objects``), never the simulator's.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import ClassVar

from sgvla.eval.suite import SuiteConfig
from sgvla.so101.cameras import CAMERAS
from sgvla.so101.hardware.joints import DEFAULT_LIMITS, JOINTS


@functools.cache
def _controller_factory():
    """One per process: its IK model is compiled on first use, not again for every episode."""
    from sgvla.so101.twin.pick_place import controller_factory

    return controller_factory()


def _default_home() -> dict[str, float]:
    return {joint: 0.0 for joint in JOINTS[:-1]} | {JOINTS[-1]: 10.0}


@SuiteConfig.register("so101_hardware")
@dataclass
class So101HardwareSuite(SuiteConfig):
    """Options: the protocol's settings (they reach the arm_policy node with every episode)."""

    blind: bool = True  # the operator is not told the context mode, so cannot favour one
    episode_time_s: float = 30.0  # an episode's time limit (its step limit: this x control_rate_hz)
    control_rate_hz: float = 30.0  # policy steps (joint goals) per second
    # The home pose before every episode, LeRobot units (degrees, gripper 0..100 %); set your rig's rest pose.
    home: dict[str, float] = field(default_factory=_default_home)
    home_step_deg: float = 2.0  # the largest goal change per control tick while homing (bounded speed)
    home_tolerance_deg: float = 3.0  # homed when every joint is this close
    home_timeout_s: float = 30.0  # not homed by then: the episode is an infrastructure failure
    # A later verdict within this long of an episode's first replaces it (the operator corrects a wrong word at
    # once); 0: the first verdict stands and later ones are refused.
    verdict_window_s: float = 3.0
    # fiducial_graphs runs (so101_eval perception=true): graph modes and policies that read object positions can run
    perception: bool = False

    tasks: ClassVar[tuple[int, ...]] = tuple(range(5))
    ontology: ClassVar[str] = "so101_tabletop"
    views: ClassVar[tuple[str, ...]] = CAMERAS
    learned_policies: ClassVar[bool] = True  # LeRobot checkpoints trained on SO101 data (sgvla.so101.learned)
    image_graph_sources: ClassVar[bool] = False
    privileged_scene: ClassVar[bool] = False  # no simulator: what is known of the objects is perceived
    in_process: ClassVar[bool] = False  # runs over the arm's topics only

    def __post_init__(self) -> None:
        unknown = sorted(set(self.home) - set(JOINTS))
        if unknown:
            raise ValueError(f"home: unknown joint(s) {unknown}; valid: {list(JOINTS)}")
        self.home = {**_default_home(), **{j: float(v) for j, v in self.home.items()}}
        for joint, value in self.home.items():
            low, high = DEFAULT_LIMITS[joint]
            if not (math.isfinite(value) and low <= value <= high):
                raise ValueError(f"home.{joint}={value} is outside the joint's limits [{low:.1f}, {high:.1f}]")
        if not (math.isfinite(self.verdict_window_s) and self.verdict_window_s >= 0):
            raise ValueError(f"verdict_window_s must be >= 0, got {self.verdict_window_s}")
        for name in ("episode_time_s", "control_rate_hz", "home_step_deg", "home_tolerance_deg", "home_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")

    @property
    def graph_modes(self) -> bool:
        return self.perception

    @property
    def knows_objects(self) -> bool:
        return self.perception

    @property
    def perceives(self) -> bool:
        return self.perception

    def setup_hint(self) -> str:
        return "" if self.perception else (" (no perception: set the suite's `perception: true` and launch "
                                           "`sgvla launch so101_eval perception=true`)")

    def episode_info(self, task_id: int, perturbation: str) -> dict:
        """What scripted policies read besides the scene: the task's goal (target, place), the table's centre and
        the pick-and-place controller (the twin's IK on the arm's kinematics; it returns joint goals in radians)."""
        from sgvla.so101.twin.config import TARGET, load_twin_config
        from sgvla.so101.twin.perturbations import load_perturbations

        config = load_twin_config()
        layout = load_perturbations(perturbation, config).layout(config, task_id)
        return {"goal": (TARGET, layout.place), "table_center": [*config.table_center_xy, 0.0],
                "pick_place": _controller_factory()}

    def stages(self, task_id: int):
        """With perception, the stages are read from the perceived scene (the operator's verdict stays the success);
        without it nothing knows where the objects are: None, progress unknown."""
        if not self.perception:
            return None
        from sgvla.so101.twin.suite import so101_stages

        return so101_stages()

    def lerobot_env_config(self):
        """Checkpoints load by the features of the data they were trained on; on the arm their chunks are computed
        while the current one plays (`So101ChunkedPolicy`: the control loop never waits)."""
        from sgvla.so101.learned import So101Embodiment

        return So101Embodiment(chunked=True)

    @property
    def max_steps(self) -> int:
        return max(1, round(self.episode_time_s * self.control_rate_hz))

    def perturbations(self) -> list[str]:
        from sgvla.so101.twin.perturbations import available_perturbations

        return available_perturbations()

    def check_perturbations(self, name: str) -> None:
        super().check_perturbations(name)
        from sgvla.so101.twin.perturbations import load_perturbations

        if load_perturbations(name).referring is not None:  # sgvla.core.referring
            raise ValueError(f"perturbation set {name!r} words each instruction from the simulator's scene at its "
                             "reset; on the arm the operator sets the scene after the prompt is shown (run it on the "
                             "twin: suite so101_twin with `sgvla eval` or `sgvla launch sim_eval`)")

    def make_backend(self, task_id: int, perturbation: str, render_images: bool, max_steps: int | None = None):
        raise ValueError("the so101_hardware suite runs on the physical arm over its topics: "
                         "`sgvla launch so101_eval eval_config=...` (in process there is no arm to drive)")

    def scene_card(self, task_id: int, perturbation: str) -> tuple[str, str]:
        """(the task's prompt under the perturbation, what the operator changes in the scene) for the operator."""
        from sgvla.so101.twin.config import load_twin_config
        from sgvla.so101.twin.perturbations import load_perturbations

        config = load_twin_config()
        perturbations = load_perturbations(perturbation, config)
        layout = perturbations.layout(config, task_id)
        return layout.prompt, perturbations.for_task(task_id).describe()
