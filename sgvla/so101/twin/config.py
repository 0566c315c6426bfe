"""Typed configuration of the SO101 MuJoCo twin: physics rates, cameras, object sizes and the five task layouts.

Loaded from ``config/twin/*.yaml`` with :func:`load_twin_config`. The world frame is the arm's
base frame (x forward, y to the robot's left, z up, origin on the table top), the frame the
camera calibration files give their extrinsics in and the frame the scene-graph rules read
("in front of" = larger x, "left of" = larger y).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sgvla.core.config import load_config
from sgvla.paths import CONFIG_DIR

OBJECTS = ("black_bowl", "red_drawer", "black_stove", "cookie", "white_plate")
BOWL = "black_bowl"
DEFAULT_CONFIG = CONFIG_DIR / "twin" / "so101_tabletop.yaml"
RENDER_MESHES = ("decimated", "full")


@dataclass
class BowlShape:
    """An open bowl: a base disc and a ring of thin wall boxes (the gripper pinches one wall)."""

    radius: float = 0.05  # outer radius of the rim
    height: float = 0.035
    wall: float = 0.005  # wall and base thickness
    segments: int = 12
    density: float = 700.0
    rgba: list[float] = field(default_factory=lambda: [0.08, 0.08, 0.08, 1.0])

    def __post_init__(self):
        if self.segments < 6:
            raise ValueError(f"bowl.segments must be >= 6 for a closed ring, got {self.segments}")
        if not 0 < self.wall < self.radius / 2 or self.height <= self.wall:
            raise ValueError(f"bowl dimensions do not make a bowl: radius={self.radius} height={self.height} "
                             f"wall={self.wall}")


@dataclass
class BoxShape:
    """A box object (drawer cabinet, stove, cookie box) or, with ``cylinder``, a disc (plate)."""

    half_size: list[float]  # x, y, z half extents (cylinder: radius, unused, half height)
    rgba: list[float]
    density: float = 500.0
    cylinder: bool = False

    def __post_init__(self):
        if len(self.half_size) != 3 or min(self.half_size) <= 0:
            raise ValueError(f"half_size must be 3 positive numbers, got {self.half_size}")
        if len(self.rgba) != 4:
            raise ValueError(f"rgba must have 4 values, got {self.rgba}")


@dataclass
class TaskLayout:
    """One task: the prompt, where the bowl goes, and the table positions (x, y) of every object.

    The bowl stands on the table at ``layout[black_bowl]`` or, with ``bowl_on``, on top of that object.
    """

    prompt: str
    place: str  # the object the bowl must end up on top of
    layout: dict[str, list[float]]
    bowl_on: str = ""

    def __post_init__(self):
        needed = set(OBJECTS) - ({BOWL} if self.bowl_on else set())
        missing = sorted(needed - set(self.layout))
        unknown = sorted(set(self.layout) - set(OBJECTS))
        if missing or unknown:
            raise ValueError(f"task {self.prompt!r}: layout misses {missing}, unknown objects {unknown}; "
                             f"objects are {list(OBJECTS)}")
        bad = [n for n, xy in self.layout.items() if len(xy) != 2]
        if bad:
            raise ValueError(f"task {self.prompt!r}: layout positions must be [x, y]; bad: {bad}")
        for name in (self.place, self.bowl_on):
            if name and (name not in OBJECTS or name == BOWL):
                raise ValueError(f"task {self.prompt!r}: {name!r} is not an object the bowl can go on")


@dataclass
class TwinConfig:
    control_rate_hz: float = 30.0  # like the real rig's control loop
    physics_dt: float = 0.002
    settle_s: float = 0.5  # physics time after a reset, so objects rest before the first observation
    position_noise: float = 0.01  # metres, uniform per object and axis (x, y), seeded by reset(seed)
    rest_pose: dict[str, float] = field(default_factory=dict)  # radians by joint; missing joints at 0
    table_half_size: list[float] = field(default_factory=lambda: [0.35, 0.4, 0.02])
    table_center_xy: list[float] = field(default_factory=lambda: [0.2, 0.0])
    agentview_calibration: str = "agentview"  # calibration/ name or path
    wrist_calibration: str = "wrist"
    image_width: int = 640  # default render size
    image_height: int = 480
    render_samples: int = 0  # MSAA samples of the offscreen buffer (0: cheapest on CPU)
    # Meshes cameras draw: "decimated" (sgvla.sim.render_meshes, made for rendering; physics never sees them) or
    # "full" (the package's meshes as they are, 400k triangles: ~7x slower on a CPU).
    render_meshes: str = "decimated"
    bowl: BowlShape = field(default_factory=BowlShape)
    shapes: dict[str, BoxShape] = field(default_factory=dict)  # every object but the bowl
    tasks: list[TaskLayout] = field(default_factory=list)

    def __post_init__(self):
        if self.control_rate_hz <= 0 or self.physics_dt <= 0 or self.physics_dt > 1 / self.control_rate_hz:
            raise ValueError(f"need 0 < physics_dt <= 1/control_rate_hz, got physics_dt={self.physics_dt}, "
                             f"control_rate_hz={self.control_rate_hz}")
        if self.render_meshes not in RENDER_MESHES:
            raise ValueError(f"render_meshes must be one of {list(RENDER_MESHES)}, got {self.render_meshes!r}")
        missing = sorted(set(OBJECTS) - {BOWL} - set(self.shapes))
        if missing:
            raise ValueError(f"shapes misses {missing}")
        if not self.tasks:
            raise ValueError("tasks is empty")

    def task(self, task_id: int) -> TaskLayout:
        if not 0 <= task_id < len(self.tasks):
            raise ValueError(f"unknown task id {task_id}; the twin has tasks 0..{len(self.tasks) - 1}")
        return self.tasks[task_id]


def load_twin_config(path: str | Path = DEFAULT_CONFIG, overrides: dict | None = None) -> TwinConfig:
    return load_config(TwinConfig, path, overrides)
