"""The tabletop objects' ArUco markers as data: which marker sits where on which object, and the marker images.

``config/perception/so101_markers.yaml`` names the dictionary and, per object, its extent and its markers (id, side
of the black square, the face it lies on and its centre in the object frame); everything is checked at load (an
unknown face or dictionary, a duplicate id, a marker off its object or hanging over its face's edge) with the file
and the object in the message. The same data places the twin's marker textures, prints the sheet of `sgvla markers`
and gives the detector its object points, so the printed, simulated and perceived markers cannot disagree.

Marker frame (OpenCV's ArUco convention): origin at the square's centre, x to the marker's right, y to its top,
z out of the face. Its corners, in the order the detector returns them, are top-left, top-right, bottom-right,
bottom-left.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import cv2
import numpy as np

from sgvla.core.config import ConfigError, load_config
from sgvla.paths import CONFIG_DIR

DEFAULT_MARKERS = CONFIG_DIR / "perception" / "so101_markers.yaml"
DICTIONARIES = tuple(name for name in dir(cv2.aruco) if name.startswith("DICT_"))
# The face a marker lies on -> (outward normal z, marker's up y) in the object frame. On the top face the marker's
# top edge points back towards the arm, so it reads upright in the agent view (which looks back at the arm).
FACES = {
    "top": ((0, 0, 1), (-1, 0, 0)),
    "front": ((1, 0, 0), (0, 0, 1)),
    "back": ((-1, 0, 0), (0, 0, 1)),
    "left": ((0, 1, 0), (0, 0, 1)),
    "right": ((0, -1, 0), (0, 0, 1)),
}
ON_SURFACE = 1e-3  # metres a marker's centre may lie outside its object's extent (tape, print thickness)


@dataclass
class MarkerPlacement:
    """One marker on an object: ``size`` is the side of its black square, ``position`` its centre (object frame)."""

    id: int
    size: float
    face: str
    position: list[float]

    def __post_init__(self) -> None:
        if self.face not in FACES:
            raise ConfigError(f"marker {self.id}: face {self.face!r} is not one of {list(FACES)}")
        if not self.size > 0:
            raise ConfigError(f"marker {self.id}: size must be positive (metres), got {self.size}")
        if len(self.position) != 3:
            raise ConfigError(f"marker {self.id}: position needs x, y, z in metres, got {self.position}")

    @property
    def rotation(self) -> np.ndarray:
        """(3, 3) object-from-marker rotation: columns are the marker's x, y, z in the object frame."""
        z, y = (np.array(v, dtype=np.float64) for v in FACES[self.face])
        return np.column_stack([np.cross(y, z), y, z])

    @property
    def object_from_marker(self) -> np.ndarray:
        pose = np.eye(4)
        pose[:3, :3], pose[:3, 3] = self.rotation, self.position
        return pose

    def corners(self) -> np.ndarray:
        """(4, 3) the black square's corners in the marker frame, in the detector's order."""
        h = self.size / 2
        return np.array([[-h, h, 0.0], [h, h, 0.0], [h, -h, 0.0], [-h, -h, 0.0]])


@dataclass
class ObjectMarkers:
    """An object's extent (``half_size``; with ``cylinder`` the first value is the radius) and its markers;
    ``upright``: it stands (or is carried) level, so its pose is only turned about base z."""

    half_size: list[float]
    markers: list[MarkerPlacement]
    cylinder: bool = False
    upright: bool = True

    def __post_init__(self) -> None:
        if len(self.half_size) != 3 or min(self.half_size) <= 0:
            raise ConfigError(f"half_size must be 3 positive numbers (metres), got {self.half_size}")
        if not self.markers:
            raise ConfigError("needs at least one marker")


@dataclass
class MarkerConfig:
    """See the module docstring; ``max_age_s`` is how long a pose outlives its last sighting."""

    dictionary: str
    objects: dict[str, ObjectMarkers]
    max_age_s: float = 1.0
    carry_radius: float = 0.08  # metres from the gripper frame within which the closing gripper takes an object
    source: str = field(default="", init=False, compare=False)

    def __post_init__(self) -> None:
        if self.dictionary not in DICTIONARIES:
            raise ConfigError(f"dictionary {self.dictionary!r} is not an OpenCV ArUco dictionary; "
                              f"valid: {list(DICTIONARIES)}")
        if not self.max_age_s >= 0:
            raise ConfigError(f"max_age_s must be >= 0 seconds, got {self.max_age_s}")
        if not self.carry_radius >= 0:
            raise ConfigError(f"carry_radius must be >= 0 metres, got {self.carry_radius}")
        if not self.objects:
            raise ConfigError("objects: at least one object needs markers")
        seen: dict[int, str] = {}
        n_ids = self.aruco_dictionary.bytesList.shape[0]
        for name, obj in self.objects.items():
            for marker in obj.markers:
                where = f"objects.{name}: marker {marker.id}"
                if not 0 <= marker.id < n_ids:
                    raise ConfigError(f"{where}: id out of {self.dictionary}'s range 0..{n_ids - 1}")
                if marker.id in seen:
                    raise ConfigError(f"{where}: id already used by {seen[marker.id]}; every marker needs its own id")
                seen[marker.id] = name
                _check_on_object(where, obj, marker)

    @cached_property
    def aruco_dictionary(self) -> cv2.aruco.Dictionary:
        return cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary))

    @property
    def cells(self) -> int:
        """Cells across a marker's black square (its bits plus the black border)."""
        return int(self.aruco_dictionary.markerSize) + 2

    @cached_property
    def by_id(self) -> dict[int, tuple[str, MarkerPlacement]]:
        return {m.id: (name, m) for name, obj in self.objects.items() for m in obj.markers}

    def marker_image(self, marker_id: int, cell_px: int, margin_cells: int = 1) -> np.ndarray:
        """(S, S) uint8 image of one marker, ``cell_px`` pixels per cell, with a white margin of ``margin_cells``."""
        square = cv2.aruco.generateImageMarker(self.aruco_dictionary, marker_id, self.cells * cell_px)
        pad = margin_cells * cell_px
        return cv2.copyMakeBorder(square, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=255)

    def plate_size(self, marker: MarkerPlacement, margin_cells: int = 1) -> float:
        """Side in metres of a marker with its white margin (what is cut out and stuck on)."""
        return marker.size * (self.cells + 2 * margin_cells) / self.cells


def _check_on_object(where: str, obj: ObjectMarkers, marker: MarkerPlacement) -> None:
    hx, hy, hz = obj.half_size
    lo, hi = np.array([-hx, -hy, 0.0]) - ON_SURFACE, np.array([hx, hy, 2 * hz]) + ON_SURFACE
    p = np.asarray(marker.position, dtype=np.float64)
    if np.any(p < lo) or np.any(p > hi):
        raise ConfigError(f"{where}: position {marker.position} lies outside the object's extent "
                          f"(x {-hx}..{hx}, y {-hy}..{hy}, z 0..{2 * hz})")
    normal = np.array(FACES[marker.face][0], dtype=np.float64)
    axis = int(np.flatnonzero(normal)[0])
    face_at = (2 * hz if axis == 2 else obj.half_size[axis]) * normal[axis]
    if marker.face != "top" and abs(p[axis] - face_at) > ON_SURFACE:  # the top may be inside (a bowl's floor)
        raise ConfigError(f"{where}: on the {marker.face} face its centre needs {'xyz'[axis]} = {face_at}, "
                          f"got {p[axis]}")
    corners = (marker.object_from_marker @ np.c_[marker.corners(), np.ones(4)].T)[:3].T
    inside = np.all((corners >= lo) & (corners <= hi), axis=1)
    if obj.cylinder and marker.face == "top":
        inside &= np.hypot(corners[:, 0], corners[:, 1]) <= hx + ON_SURFACE
    if not inside.all():
        raise ConfigError(f"{where}: a {marker.size} m marker at {marker.position} hangs over the edge of the "
                          f"{marker.face} face")


def load_marker_config(path: str | Path = DEFAULT_MARKERS) -> MarkerConfig:
    """The marker layout of ``path``, checked (errors name the file and the object)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"marker config not found: {path}")
    config = load_config(MarkerConfig, path)
    config.source = str(path)
    return config


PLACEMENT_FRAME = ("centre: mm from the object's underside centre, x away from the arm, y to the robot's left, "
                   "z up")


def placement_text(name: str, marker: MarkerPlacement) -> str:
    """Where ``marker`` goes on ``name``, short enough for one line of the sheet (frame: :data:`PLACEMENT_FRAME`)."""
    x, y, z = (round(v * 1000) for v in marker.position)
    up = "top edge to -x (the arm)" if marker.face == "top" else "upright"
    return f"{name} #{marker.id} ({marker.size * 1000:g} mm): {marker.face}, centre {x} {y} {z}, {up}"
