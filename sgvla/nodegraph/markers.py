"""A scene graph as 3-D markers: what RViz's MarkerArray display and Foxglove's 3D panel draw of it.

Plain descriptions (:class:`MarkerSpec`), no ROS: the nodes turn them into `visualization_msgs/MarkerArray`
(`sgvla_ros.markers`). Per object a box (its bounding box: world-aligned from a scene's geoms, oriented for a
perceived pose) and a text label above it; per triplet of each camera's graph an arrow from the subject to the
object with the relation written at its middle. The task's target is drawn in its own colour, with a larger label
and its arrows thicker; the place object (where the target goes) in another.

Layout of the arrows, so that none hides another: an arrow runs between the tops of the two boxes, lifted above
them; the k-th relation of the same (subject, object) pair is lifted k steps higher, each camera's graph one band
higher than the previous camera's (its arrows in its own colour), and every arrow is shifted sideways to its right,
so `a is_left_of b` and `b is_right_of a` run side by side instead of on top of each other.

Ids are stable: a function of the object's name or the triplet (`stable_ids`), so a marker that stays from one
graph to the next is replaced in place (no flicker), and the node deletes exactly the ones that went away.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

CUBE, ARROW, TEXT = "cube", "arrow", "text"

Color = tuple[float, float, float, float]  # RGBA, 0..1
OBJECT_COLOR: Color = (0.55, 0.62, 0.72, 0.45)
TARGET_COLOR: Color = (1.0, 0.45, 0.0, 0.85)
PLACE_COLOR: Color = (0.2, 0.75, 0.3, 0.6)
LABEL_COLOR: Color = (1.0, 1.0, 1.0, 1.0)
CAMERA_COLORS: tuple[Color, ...] = ((0.0, 0.6, 1.0, 0.9), (0.95, 0.25, 0.6, 0.9), (0.6, 0.9, 0.2, 0.9),
                                    (0.7, 0.5, 1.0, 0.9))

LABEL_HEIGHT = 0.025  # metres: text height of an object label (the target's: TARGET_LABEL_SCALE times it)
TARGET_LABEL_SCALE = 1.6
RELATION_LABEL_HEIGHT = 0.015
CLEARANCE = 0.03  # arrows start this far above the boxes' tops
PAIR_STEP = 0.015  # each further relation of one (subject, object) pair is lifted this much more
CAMERA_BAND = 0.06  # each further camera's arrows are lifted this much more
SIDE_SHIFT = 0.008  # arrows run this far to the right of the line between the boxes
SHAFT = 0.004  # arrow shaft diameter (the target's arrows: twice it)
HEAD = (0.012, 0.018)  # arrow head diameter and length


@dataclass(frozen=True)
class ObjectBox:
    """An object of the scene: its name, the centre and half sizes of its box, and the box's rotation (object to
    scene frame; the identity for world-aligned boxes), in the scene frame (`world`, `base_link`)."""

    name: str
    center: tuple[float, float, float]
    half_size: tuple[float, float, float]
    rotation: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)  # row-major 3x3

    @property
    def top(self) -> np.ndarray:
        """The highest point of the box above its centre (world z up)."""
        reach = np.abs(np.asarray(self.rotation).reshape(3, 3)) @ np.asarray(self.half_size)
        return np.asarray(self.center) + [0.0, 0.0, reach[2]]


@dataclass(frozen=True)
class MarkerSpec:
    """One marker: `kind` cube (pose and scale: the box's full size), arrow (`points`: start and end; scale: shaft
    diameter, head diameter, head length) or text (pose; scale z: text height). `ns` and `id` name it."""

    ns: str
    id: int
    kind: str
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    orientation: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)  # x y z w
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    color: Color = LABEL_COLOR
    points: tuple[tuple[float, float, float], ...] = ()
    text: str = ""

    @property
    def key(self) -> tuple[str, int]:
        return self.ns, self.id


@dataclass(frozen=True)
class SceneMarkers:
    """What `scene_markers` made: the markers, and the triplets it could not draw (an end not among the objects)."""

    markers: list[MarkerSpec]
    skipped: list[tuple[str, str, str, str]] = field(default_factory=list)  # (camera, subject, relation, object)

    def of(self, ns_suffix: str) -> list[MarkerSpec]:
        return [m for m in self.markers if m.ns.endswith(ns_suffix)]


def scene_boxes(scene) -> list[ObjectBox]:
    """World-aligned boxes of a SceneState's objects (the bounding box of each object's geoms)."""
    from sgvla.core.state import object_aabbs

    centers, halves = object_aabbs(scene)
    return [ObjectBox(name, tuple(map(float, c)), tuple(map(float, h)))
            for name, c, h in zip(scene.objects, centers, halves, strict=True)]


def oriented_box(name: str, position: Sequence[float], rotation: np.ndarray, half_size: Sequence[float],
                 base_at_origin: bool = True) -> ObjectBox:
    """The box of a perceived pose: `half_size` in the object's frame, its origin at the middle of the box's base
    (the fiducial objects' convention) unless `base_at_origin` is false."""
    r = np.asarray(rotation, dtype=np.float64).reshape(3, 3)
    half = np.asarray(half_size, dtype=np.float64)
    center = np.asarray(position, dtype=np.float64) + (r @ [0.0, 0.0, half[2]] if base_at_origin else 0.0)
    return ObjectBox(name, tuple(map(float, center)), tuple(map(float, half)), tuple(map(float, r.reshape(-1))))


def quaternion_xyzw(rotation: Sequence[float]) -> tuple[float, float, float, float]:
    """The unit quaternion (x, y, z, w) of a row-major 3x3 rotation."""
    m = np.asarray(rotation, dtype=np.float64).reshape(3, 3)
    t = np.trace(m)
    if t > 0:
        s = 2.0 * np.sqrt(t + 1.0)
        q = ((m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s)
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
        q = [0.0, 0.0, 0.0, (m[k, j] - m[j, k]) / s]
        q[i], q[j], q[k] = 0.25 * s, (m[j, i] + m[i, j]) / s, (m[k, i] + m[i, k]) / s
    q = np.asarray(q) / np.linalg.norm(q)
    return tuple(float(v) for v in (q if q[3] >= 0 else -q))


def stable_ids(ns: str, keys: Iterable[str]) -> dict[str, int]:
    """A non-negative int32 id per key, a function of (ns, key) alone (CRC-32); a clash within the namespace moves
    the later key (in sorted order) to the next free id, so ids stay unique and repeatable."""
    out, used = {}, set()
    for key in sorted(set(keys)):
        i = zlib.crc32(f"{ns}\0{key}".encode()) & 0x7FFFFFFF
        while i in used:
            i = (i + 1) & 0x7FFFFFFF
        used.add(i)
        out[key] = i
    return out


def scene_markers(objects: Sequence[ObjectBox], graphs: Mapping[str, Iterable[tuple[str, str, str]]],
                  target: str = "", place: str = "", prefix: str = "") -> SceneMarkers:
    """Markers of `objects` and of each camera's graph (camera -> triplets), the target and the place highlighted.

    Namespaces (each under `prefix`, e.g. the graph source `ground_truth/`): `objects` (boxes), `object_labels`,
    `relations/<camera>` (arrows), `relation_labels/<camera>`; a viewer shows or hides each one.
    """
    by_name = {o.name: o for o in objects}
    markers: list[MarkerSpec] = []
    ns = prefix + "objects"
    ids = stable_ids(ns, by_name)
    for name, box in by_name.items():
        color = TARGET_COLOR if name == target else PLACE_COLOR if name == place else OBJECT_COLOR
        markers.append(MarkerSpec(ns, ids[name], CUBE, tuple(map(float, box.center)), quaternion_xyzw(box.rotation),
                                  tuple(2.0 * max(h, 1e-3) for h in box.half_size), color))
    ns = prefix + "object_labels"
    ids = stable_ids(ns, by_name)
    for name, box in by_name.items():
        height = LABEL_HEIGHT * (TARGET_LABEL_SCALE if name == target else 1.0)
        text = f"{name} (target)" if name == target else f"{name} (place)" if name == place else name
        color = TARGET_COLOR[:3] + (1.0,) if name == target else LABEL_COLOR
        markers.append(MarkerSpec(ns, ids[name], TEXT, tuple(map(float, box.top + [0.0, 0.0, 0.6 * height])),
                                  scale=(height, height, height), color=color, text=text))
    skipped = []
    for c, (camera, triplets) in enumerate(graphs.items()):
        triplets = sorted(set(tuple(t) for t in triplets))
        drawn = [t for t in triplets if t[0] in by_name and t[2] in by_name and t[0] != t[2]]
        skipped += [(camera, *t) for t in triplets if t not in drawn]
        arrow_ns, label_ns = f"{prefix}relations/{camera}", f"{prefix}relation_labels/{camera}"
        keys = [" ".join(t) for t in drawn]
        arrow_ids, label_ids = stable_ids(arrow_ns, keys), stable_ids(label_ns, keys)
        color = CAMERA_COLORS[c % len(CAMERA_COLORS)]
        rank: dict[tuple[str, str], int] = {}
        for (s, r, o), key in zip(drawn, keys):
            k = rank[(s, o)] = rank.get((s, o), -1) + 1
            start, end = _arrow(by_name[s], by_name[o], CLEARANCE + c * CAMERA_BAND + k * PAIR_STEP)
            shaft = SHAFT * (2.0 if target in (s, o) else 1.0)
            markers.append(MarkerSpec(arrow_ns, arrow_ids[key], ARROW, scale=(shaft, *HEAD), color=color,
                                      points=(tuple(map(float, start)), tuple(map(float, end)))))
            middle = (start + end) / 2 + [0.0, 0.0, RELATION_LABEL_HEIGHT * 0.8]
            markers.append(MarkerSpec(label_ns, label_ids[key], TEXT, tuple(map(float, middle)),
                                      scale=(RELATION_LABEL_HEIGHT,) * 3, color=color[:3] + (1.0,), text=r))
    return SceneMarkers(markers, skipped)


def _arrow(subject: ObjectBox, obj: ObjectBox, lift: float) -> tuple[np.ndarray, np.ndarray]:
    start, end = subject.top + [0.0, 0.0, lift], obj.top + [0.0, 0.0, lift]
    direction = end[:2] - start[:2]
    norm = float(np.linalg.norm(direction))
    if norm > 1e-9:  # to the right of the direction of travel, seen from above
        right = np.array([direction[1], -direction[0], 0.0]) / norm
        start, end = start + SIDE_SHIFT * right, end + SIDE_SHIFT * right
    return start, end
