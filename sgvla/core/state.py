"""State and observation types every embodiment fills and every policy, graph source and record reads.

Plain numpy, no simulator: a :class:`SceneState` is what the scene-graph core and scripted controllers read of
one instant (from MuJoCo in simulation, from perception on the real table), an :class:`Observation` what a
backend returns each step. Image conventions: a LIBERO backend stores images with rows bottom-up (MuJoCo's
OpenGL order) and boxes in that stored convention; :func:`box_to_policy_frame` maps a stored box to the
180-degree-rotated view LeRobot's LIBERO processor gives policies. The SO101 twin and real cameras are upright.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sgvla.scene_graph import Camera, GeomBatch, ViewGraph, ground_truth_batch

@dataclass(frozen=True, eq=False)
class Boxes:
    """Oriented boxes in the world: ``owner`` is an object column or -1 (table, walls, ...)."""

    owner: np.ndarray  # (K,)
    centers: np.ndarray  # (K, 3)
    rotations: np.ndarray  # (K, 3, 3)
    half_sizes: np.ndarray  # (K, 3)

    def distance(self, points: np.ndarray, keep: np.ndarray) -> float:
        """Smallest distance from any of ``points`` (M, 3) to the kept boxes (inf when none is kept)."""
        if not keep.any():
            return float("inf")
        c, R, h = self.centers[keep], self.rotations[keep], self.half_sizes[keep]
        local = np.einsum("kji,mkj->mki", R, points[:, None, :] - c[None])  # R^T (p - c)
        return float(np.linalg.norm(local - np.clip(local, -h, h), axis=-1).min())



@dataclass(frozen=True, eq=False)
class Observation:
    """What a backend returns each step. LIBERO: ``policy`` is the batch a LeRobot policy's preprocessor
    takes (``observation.images.image``, ``observation.images.image2``, ``observation.state`` 8-D, ``task``);
    ``images``: camera name -> (H, W, 3) uint8 as the backend stores it (LIBERO: rows bottom-up, the
    SO101 twin: upright); ``raw``: the environment's own observation, what policies act on."""

    policy: Mapping[str, Any]  # LIBERO: made on first read
    images: dict[str, np.ndarray]
    raw: dict[str, Any]
    task: str


@dataclass(frozen=True, eq=False)
class RobotState:
    """What a robot reports of itself, as a joint state topic and forward kinematics give it: every joint by name
    (arm and gripper, radians or metres) and, where known, its end effector (position, quaternion x y z w)."""

    names: tuple[str, ...]
    positions: np.ndarray
    velocities: np.ndarray
    eef_position: np.ndarray | None = None
    eef_quaternion: np.ndarray | None = None

    def of(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(positions, velocities) of `names`, in that order."""
        index = [self.names.index(n) for n in names]
        return np.asarray(self.positions)[index], np.asarray(self.velocities)[index]


GROUND_TRUTH = "ground_truth"  # the source of a scene (and its graphs) that is the simulator's own state


@dataclass(frozen=True, eq=False)
class SceneState:
    """Privileged state of one instant: what the scene-graph core and scripted controllers read."""

    objects: tuple[str, ...]
    positions: np.ndarray  # (N, 3) world positions of the objects' _main bodies
    geoms: GeomBatch  # one frame
    cameras: dict[str, Camera]
    eef_pos: np.ndarray  # (3,)
    eef_mat: np.ndarray  # (3, 3)
    gripper_qpos: np.ndarray  # (2,) Panda fingers, (1,) SO101 jaw
    task: str  # the suite's task language (relation rules key on it), not an overridden prompt
    obstacles: Boxes  # colliding geoms of everything but the robot, for grasp planning
    # Where the objects come from: the simulator's own state (``ground_truth``) or a perception (``fiducial``: their
    # markers). Graphs computed from the scene carry it as their source, so a perceived scene's graphs are never
    # labelled ground truth (on topics and in bags as in records).
    source: str = GROUND_TRUTH

    def position(self, name: str) -> np.ndarray:
        if name not in self.objects:
            raise KeyError(f"unknown object {name!r}; the scene has {list(self.objects)}")
        return self.positions[self.objects.index(name)]


def object_aabbs(scene) -> tuple[np.ndarray, np.ndarray]:
    """World-aligned bounding boxes of the objects' geoms: centers (N, 3) and half sizes (N, 3).

    ``scene``: a SceneState or anything with its fields (the ROS nodes decode states into namespaces).
    """
    geoms = scene.geoms
    reach = (np.abs(geoms.rotations[0]) @ geoms.half_sizes[:, :, None])[:, :, 0]
    lower, upper = geoms.centers[0] - reach, geoms.centers[0] + reach
    n = len(scene.objects)
    lo, hi = np.full((n, 3), np.inf), np.full((n, 3), -np.inf)
    np.minimum.at(lo, geoms.geom_object, lower)
    np.maximum.at(hi, geoms.geom_object, upper)
    empty = ~np.isfinite(lo[:, 0])
    lo[empty] = hi[empty] = np.asarray(scene.positions)[empty]
    return (lo + hi) / 2, (hi - lo) / 2



def box_to_policy_frame(box: Sequence[int], width: int, height: int) -> tuple[int, int, int, int]:
    """A stored-convention ``[x1, y1, x2, y2]`` box in the 180-degree-rotated image a LeRobot policy sees."""
    x1, y1, x2, y2 = (int(c) for c in box)
    return width - x2, height - y2, width - x1, height - y1


def ground_truth_views(scene: SceneState, views: Sequence[str] | None = None) -> dict[str, ViewGraph]:
    """Ground-truth graph and boxes (stored image convention) per camera of the scene (default: all of its
    cameras): the paper's projection and relation rules applied to one instant."""
    cameras = scene.cameras if views is None else {v: scene.cameras[v] for v in views}
    batch = ground_truth_batch(scene.objects, scene.geoms, scene.positions[None], cameras, scene.task)
    return {view: graphs.frame(0) for view, graphs in batch.items()}
