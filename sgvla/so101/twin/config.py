"""Typed configuration of the SO101 MuJoCo twin: physics rates, cameras, object sizes and the five task layouts.

Loaded from ``config/twin/*.yaml`` with :func:`load_twin_config`. The world frame is the arm's
base frame (x forward, y to the robot's left, z up, origin on the table top), the frame the
camera calibration files give their extrinsics in and the frame the scene-graph rules read
("in front of" = larger x, "left of" = larger y).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sgvla.core.config import load_config
from sgvla.paths import CONFIG_DIR
from sgvla.so101.cameras import AGENTVIEW, WRIST

# Two identical black bowls, named as LIBERO-Spatial names its two (config/ontology/so101_tabletop.yaml): the
# target is always ``black_bowl_1``; ``black_bowl_2`` looks the same, so only words or a graph tell them apart.
BOWLS = ("black_bowl_1", "black_bowl_2")
TARGET = BOWLS[0]
OBJECTS = (*BOWLS, "red_drawer", "black_stove", "cookie", "white_plate")
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
    """One task: the prompt, where the target bowl goes, and where every object of the scene stands.

    ``layout`` gives the table position (x, y) of each object on the table; ``stands_on`` maps an object to the table
    object it stands on (a bowl on the drawer). The scene holds exactly these objects; the target bowl and the
    place object are among them.
    """

    prompt: str
    place: str  # the object the target bowl must end up on top of
    layout: dict[str, list[float]]
    stands_on: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        where = f"task {self.prompt!r}"
        unknown = sorted((set(self.layout) | set(self.stands_on) | set(self.stands_on.values())) - set(OBJECTS))
        if unknown:
            raise ValueError(f"{where}: unknown objects {unknown}; objects are {list(OBJECTS)}")
        both = sorted(set(self.layout) & set(self.stands_on))
        if both:
            raise ValueError(f"{where}: {both} both on the table (layout) and on another object (stands_on)")
        missing = sorted({TARGET, self.place} - set(self.objects))
        if missing:
            raise ValueError(f"{where}: the scene misses {missing} (the target bowl and the place object)")
        bad = [n for n, xy in self.layout.items() if len(xy) != 2]
        if bad:
            raise ValueError(f"{where}: layout positions must be [x, y]; bad: {bad}")
        if self.place in BOWLS:
            raise ValueError(f"{where}: the place object {self.place!r} is a bowl; the target goes on another object")
        for obj, support in self.stands_on.items():
            if support not in self.layout or support in BOWLS:
                raise ValueError(f"{where}: {obj!r} stands on {support!r}, which is not a table object of this "
                                 f"scene other than a bowl (table objects: {sorted(self.layout)})")
        if self.stands_on.get(TARGET) == self.place:
            raise ValueError(f"{where}: the target bowl already stands on the place object {self.place!r}")

    @property
    def objects(self) -> tuple[str, ...]:
        """The scene's objects, in OBJECTS order."""
        return tuple(n for n in OBJECTS if n in self.layout or n in self.stands_on)

    def table_position(self, name: str) -> list[float]:
        """(x, y) of an object on the table, or of the table object it stands on."""
        return self.layout[self.stands_on.get(name, name)]


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
    # The objects' ArUco markers (sgvla.so101.perception.fiducials), drawn as textures; "" for none.
    markers: str = "config/perception/so101_markers.yaml"
    bowl: BowlShape = field(default_factory=BowlShape)
    shapes: dict[str, BoxShape] = field(default_factory=dict)  # every object but the bowl
    tasks: list[TaskLayout] = field(default_factory=list)

    def calibration_files(self) -> dict[str, str]:
        """Each twin camera's calibration file (name or path): where it sits, as perception places it."""
        return {AGENTVIEW: self.agentview_calibration, WRIST: self.wrist_calibration}

    def __post_init__(self):
        if self.control_rate_hz <= 0 or self.physics_dt <= 0 or self.physics_dt > 1 / self.control_rate_hz:
            raise ValueError(f"need 0 < physics_dt <= 1/control_rate_hz, got physics_dt={self.physics_dt}, "
                             f"control_rate_hz={self.control_rate_hz}")
        if self.render_meshes not in RENDER_MESHES:
            raise ValueError(f"render_meshes must be one of {list(RENDER_MESHES)}, got {self.render_meshes!r}")
        missing = sorted(set(OBJECTS) - set(BOWLS) - set(self.shapes))
        if missing:
            raise ValueError(f"shapes misses {missing}")
        if not self.tasks:
            raise ValueError("tasks is empty")
        for i, task in enumerate(self.tasks):
            self.check_layout(task, f"task {i}")

    def task(self, task_id: int) -> TaskLayout:
        if not 0 <= task_id < len(self.tasks):
            raise ValueError(f"unknown task id {task_id}; the twin has tasks 0..{len(self.tasks) - 1}")
        return self.tasks[task_id]

    def footprint(self, name: str) -> tuple[float, float, bool]:
        """Half extents (x, y) of an object on the table and whether it is round (then both are its radius)."""
        if name in BOWLS:
            return self.bowl.radius, self.bowl.radius, True
        shape = self.shapes[name]
        return (shape.half_size[0], shape.half_size[0], True) if shape.cylinder else (*shape.half_size[:2], False)

    def check_layout(self, task: TaskLayout, where: str) -> None:
        """Fail when objects on the table overlap (closer than twice the position noise, so no seed makes them
        touch), leave the table, or a stacked object is wider than its support."""
        (cx, cy), (hx, hy) = self.table_center_xy, self.table_half_size[:2]
        margin = 2 * self.position_noise
        names = list(task.layout)
        for i, a in enumerate(names):
            ax, ay = task.layout[a]
            fa = self.footprint(a)
            if abs(ax - cx) + fa[0] > hx or abs(ay - cy) + fa[1] > hy:
                raise ValueError(f"{where}: {a} at {[ax, ay]} is not on the table")
            for b in names[i + 1:]:
                gap = footprint_gap((ax, ay), fa, tuple(task.layout[b]), self.footprint(b))
                if gap < margin:
                    raise ValueError(f"{where}: {a} and {b} are {gap * 100:.1f} cm apart; they need at least "
                                     f"{margin * 100:.1f} cm (twice position_noise)")
        for obj, support in task.stands_on.items():
            if self.footprint(obj)[0] > 1.5 * max(self.footprint(support)[:2]):
                raise ValueError(f"{where}: {obj} is too wide to stand on {support}")


def footprint_gap(a_xy, a: tuple[float, float, bool], b_xy, b: tuple[float, float, bool]) -> float:
    """Distance between two table footprints (axis-aligned boxes or discs); negative when they overlap."""
    d = np.abs(np.subtract(a_xy, b_xy))
    if a[2] and b[2]:
        return float(np.hypot(*d) - a[0] - b[0])
    disc, box = (a, b) if a[2] else (b, a)
    if disc[2]:  # a disc and a box: the disc centre's distance to the box
        outside = np.maximum(d - np.array(box[:2]), 0.0)
        return float(np.hypot(*outside) - disc[0]) if outside.any() else float(max(d - np.array(box[:2])) - disc[0])
    return float(max(d[0] - a[0] - b[0], d[1] - a[1] - b[1]))


def load_twin_config(path: str | Path = DEFAULT_CONFIG, overrides: dict | None = None) -> TwinConfig:
    return load_config(TwinConfig, path, overrides)
