"""Projected 2D boxes of objects made of oriented geoms, as the reference computes them.

Conventions (robosuite / LIBERO):

- ``Camera.cam_to_world`` is the camera pose in the world, OpenCV axes (z forward,
  y down), i.e. what ``robosuite.utils.camera_utils.get_camera_extrinsic_matrix``
  returns; ``Camera.K`` is ``get_camera_intrinsic_matrix`` (fx, fy, cx, cy).
- A geom contributes the 8 corners ``center + R @ (+-half_size)`` of its box;
  MuJoCo ``geom_size`` is used as half-sizes for every geom type, like the reference.
- Corners are moved to the camera frame with ``inv(cam_to_world)``; corners with
  camera z <= ``min_depth`` are dropped; the rest are projected with
  ``u = fx*x/z + cx`` and ``v = H - (fy*y/z + cy)``: rows count from the bottom,
  which is how LIBERO stores its (OpenGL-rendered, upside-down) images, and the
  released boxes use the stored images. Both are truncated toward zero.
- The box of the surviving corners is padded by ``pad_px``, discarded when wider
  than ``max_box_scale * W`` or taller than ``max_box_scale * H`` (projection
  artifacts of corners just in front of the camera), clamped to ``[0, W] x [0, H]``
  and kept only when ``x1 < x2`` and ``y1 < y2``. Objects without a box are not
  visible in that camera.

The arithmetic is reordered for speed (see :func:`_corner_bounds`); the reference
itself leaves the summation order of its camera transform to BLAS. Boxes agree with
the reference unless a projected corner falls within rounding error (~1e-12 px) of
an integer pixel; tests check agreement on random scenes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from sgvla.scene_graph.relations import RelationParams

# Pixel coordinates are clipped here before the integer cast: far beyond any
# image, so boxes that reach it are discarded or off-image either way.
_PIXEL_LIMIT = float(2**40)
_CHUNK_FRAMES = 256


@dataclass(frozen=True, eq=False)
class Camera:
    """Pinhole camera; ``cam_to_world`` is (4, 4), or (F, 4, 4) for a moving camera in batches."""

    name: str
    K: np.ndarray
    cam_to_world: np.ndarray
    width: int
    height: int
    _world_to_cam: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        K = np.asarray(self.K, dtype=np.float64)
        pose = np.asarray(self.cam_to_world, dtype=np.float64)
        if K.shape != (3, 3):
            raise ValueError(f"camera {self.name!r}: K must be 3x3, got shape {K.shape}")
        if pose.shape[-2:] != (4, 4) or pose.ndim not in (2, 3):
            raise ValueError(f"camera {self.name!r}: cam_to_world must be (4, 4) or (F, 4, 4), got {pose.shape}")
        if int(self.width) <= 0 or int(self.height) <= 0:
            raise ValueError(f"camera {self.name!r}: image size must be positive, got {self.width}x{self.height}")
        object.__setattr__(self, "K", K)
        object.__setattr__(self, "cam_to_world", pose)
        object.__setattr__(self, "width", int(self.width))
        object.__setattr__(self, "height", int(self.height))
        object.__setattr__(self, "_world_to_cam", np.linalg.inv(pose))

    def world_to_camera(self) -> np.ndarray:
        """The inverse extrinsic, computed like the reference (``np.linalg.inv``)."""
        return self._world_to_cam


@dataclass(frozen=True, eq=False)
class ObjectGeoms:
    """One object's geoms in one frame, world frame: centers (G, 3), rotations (G, 3, 3), half_sizes (G, 3)."""

    centers: np.ndarray
    rotations: np.ndarray
    half_sizes: np.ndarray

    def __post_init__(self) -> None:
        centers = np.asarray(self.centers, dtype=np.float64)
        if centers.ndim != 2 or centers.shape[1] != 3:
            raise ValueError(f"centers must have shape (G, 3), got {centers.shape}")
        g = len(centers)
        rotations = np.asarray(self.rotations, dtype=np.float64)
        half_sizes = np.asarray(self.half_sizes, dtype=np.float64)
        if rotations.shape != (g, 3, 3):
            raise ValueError(f"rotations must have shape ({g}, 3, 3), got {rotations.shape}")
        if half_sizes.shape != (g, 3):
            raise ValueError(f"half_sizes must have shape ({g}, 3), got {half_sizes.shape}")
        object.__setattr__(self, "centers", centers)
        object.__setattr__(self, "rotations", rotations)
        object.__setattr__(self, "half_sizes", half_sizes)


@dataclass(frozen=True, eq=False)
class GeomBatch:
    """Geoms of N objects over F frames, flat: geom g belongs to object ``geom_object[g]``.

    ``centers`` (F, G, 3) and ``rotations`` (F, G, 3, 3) change per frame;
    ``half_sizes`` (G, 3) and the geom -> object map do not.
    """

    geom_object: np.ndarray
    centers: np.ndarray
    rotations: np.ndarray
    half_sizes: np.ndarray
    n_objects: int
    _order: np.ndarray = field(init=False, repr=False)
    _starts: np.ndarray = field(init=False, repr=False)
    _present: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        geom_object = np.asarray(self.geom_object, dtype=np.intp).reshape(-1)
        g = len(geom_object)
        centers = np.asarray(self.centers, dtype=np.float64)
        rotations = np.asarray(self.rotations, dtype=np.float64)
        half_sizes = np.asarray(self.half_sizes, dtype=np.float64)
        if centers.ndim != 3 or centers.shape[1:] != (g, 3):
            raise ValueError(f"centers must have shape (F, {g}, 3), got {centers.shape}")
        if rotations.shape != (len(centers), g, 3, 3):
            raise ValueError(f"rotations must have shape ({len(centers)}, {g}, 3, 3), got {rotations.shape}")
        if half_sizes.shape != (g, 3):
            raise ValueError(f"half_sizes must have shape ({g}, 3), got {half_sizes.shape}")
        if g and (geom_object.min() < 0 or geom_object.max() >= self.n_objects):
            raise ValueError(
                f"geom_object values must lie in [0, {self.n_objects}), got {geom_object.min()}..{geom_object.max()}"
            )
        order = np.argsort(geom_object, kind="stable")
        counts = np.bincount(geom_object, minlength=self.n_objects)
        present = counts > 0
        starts = (np.cumsum(counts) - counts)[present]
        for name, value in (
            ("geom_object", geom_object),
            ("centers", centers),
            ("rotations", rotations),
            ("half_sizes", half_sizes),
            ("_order", order),
            ("_starts", starts),
            ("_present", present),
        ):
            object.__setattr__(self, name, value)

    @property
    def n_frames(self) -> int:
        return len(self.centers)

    @classmethod
    def from_objects(cls, objects: Sequence[ObjectGeoms]) -> GeomBatch:
        """One frame from per-object geoms."""
        parts = list(objects) or [ObjectGeoms(np.zeros((0, 3)), np.zeros((0, 3, 3)), np.zeros((0, 3)))]
        return cls(
            geom_object=np.repeat(np.arange(len(parts)), [len(o.centers) for o in parts]),
            centers=np.concatenate([o.centers for o in parts])[None],
            rotations=np.concatenate([o.rotations for o in parts])[None],
            half_sizes=np.concatenate([o.half_sizes for o in parts]),
            n_objects=len(objects),
        )


def project_boxes_batch(
    geoms: GeomBatch, camera: Camera, params: RelationParams = RelationParams()
) -> tuple[np.ndarray, np.ndarray]:
    """Boxes (F, N, 4) int64 ``[x1, y1, x2, y2]`` and visibility (F, N) of every object.

    Boxes of objects that are not visible are zero.
    """
    frames, n = geoms.n_frames, geoms.n_objects
    world_to_cam = camera.world_to_camera()
    if world_to_cam.ndim == 3 and len(world_to_cam) != frames:
        raise ValueError(f"camera {camera.name!r} has {len(world_to_cam)} poses for {frames} frames")
    # Rows of the 3x4 transform: scalars for a fixed camera, contiguous (F,) arrays for a moving one.
    moving = world_to_cam.ndim == 3
    rows = np.ascontiguousarray(world_to_cam[:, :3].transpose(1, 2, 0)) if moving else world_to_cam[:3]
    bounds = np.full((frames, n, 4), np.nan)
    if geoms._present.any():
        order = geoms._order
        half = np.ascontiguousarray(geoms.half_sizes[order].T[:, :, None])  # (3, G, 1)
        for start in range(0, frames, _CHUNK_FRAMES):
            stop = min(start + _CHUNK_FRAMES, frames)
            pose = rows[..., start:stop] if moving else rows
            # Layout (component, geom, frame): every operation below runs on contiguous rows.
            centers = np.take(geoms.centers[start:stop].transpose(2, 1, 0), order, axis=1)
            rotations = np.take(geoms.rotations[start:stop].transpose(2, 3, 1, 0), order, axis=2)
            bounds[start:stop, geoms._present] = _corner_bounds(
                centers, rotations, half, geoms._starts, pose, camera, params
            ).transpose(2, 1, 0)
    return _boxes_from_bounds(bounds, camera, params)


def _corner_bounds(
    centers: np.ndarray,
    rotations: np.ndarray,
    half: np.ndarray,
    starts: np.ndarray,
    world_to_cam: np.ndarray,
    camera: Camera,
    params: RelationParams,
) -> np.ndarray:
    """Per object, min and max over its corners of ``fx*x/z`` and ``fy*y/z`` (NaN: no corner in front).

    Inputs are component-first: ``centers`` (3, G, f), ``rotations`` (3, 3, G, f),
    ``half`` (3, G, 1), ``world_to_cam`` the top 3x4 of the transform, (3, 4) or
    (3, 4, f); the result is (4, N, f): min of each, then max of each.

    Camera coordinates are affine in the corner, so each geom is moved to the camera
    once, as its centre ``M c + t`` and its three half axes ``M R[:, j] h_j``, and the
    8 corners are the sign combinations of those (a sign flip is exact, so 4 sums
    give all 8). The constants ``cx``, ``cy`` and ``H - ...`` and the truncation are
    applied after the min/max, in :func:`_boxes_from_bounds`: each is monotonic, so
    the result is the same as applying them per corner.
    """
    g, f = centers.shape[1:]
    m = world_to_cam
    axes = [rotations[:, j] * half[j] for j in range(3)]  # world half axis j of each geom
    cam = np.empty((3, 8, g, f))
    offsets = np.empty((4, g, f))
    for i in range(3):
        row = list(m[i])
        center = row[0] * centers[0] + row[1] * centers[1] + row[2] * centers[2] + row[3]
        b0, b1, b2 = (row[0] * a[0] + row[1] * a[1] + row[2] * a[2] for a in axes)
        s, d = b0 + b1, b0 - b1
        np.add(s, b2, out=offsets[0])
        np.subtract(s, b2, out=offsets[1])
        np.add(d, b2, out=offsets[2])
        np.subtract(d, b2, out=offsets[3])
        np.add(center, offsets, out=cam[i, :4])
        np.subtract(center, offsets, out=cam[i, 4:])
    x, y, z = cam
    z = np.where(z > params.min_depth, z, np.nan)  # NaN corners drop out of fmin / fmax
    scaled = np.empty((8, 2, g, f))
    np.divide(camera.K[0, 0] * x, z, out=scaled[:, 0])
    np.divide(camera.K[1, 1] * y, z, out=scaled[:, 1])
    low = np.fmin.reduceat(_over_corners(np.fmin, scaled), starts, axis=1)
    high = np.fmax.reduceat(_over_corners(np.fmax, scaled), starts, axis=1)
    return np.concatenate([low, high])


def _over_corners(op: np.ufunc, values: np.ndarray) -> np.ndarray:
    """``op`` over the 8 corners (axis 0), pairwise: much faster than ``op.reduce(axis=0)``."""
    while len(values) > 1:
        half = len(values) // 2
        values = op(values[:half], values[half:])
    return values[0]


def _boxes_from_bounds(bounds: np.ndarray, camera: Camera, params: RelationParams) -> tuple[np.ndarray, np.ndarray]:
    """Boxes from (F, N, 4) corner bounds ``[min fx*x/z, min fy*y/z, max fx*x/z, max fy*y/z]``."""
    K, height = camera.K, camera.height
    has_point = ~np.isnan(bounds[..., 0])
    pixels = np.stack(
        [
            bounds[..., 0] + K[0, 2],
            height - (bounds[..., 3] + K[1, 2]),  # rows count from the bottom: max y gives min v
            bounds[..., 2] + K[0, 2],
            height - (bounds[..., 1] + K[1, 2]),
        ],
        axis=-1,
    )
    pixels = np.clip(np.nan_to_num(pixels), -_PIXEL_LIMIT, _PIXEL_LIMIT).astype(np.int64)
    pad = params.pad_px
    x1, y1, x2, y2 = pixels[..., 0] - pad, pixels[..., 1] - pad, pixels[..., 2] + pad, pixels[..., 3] + pad
    oversize = ((x2 - x1) > camera.width * params.max_box_scale) | ((y2 - y1) > height * params.max_box_scale)
    x1, y1 = np.maximum(x1, 0), np.maximum(y1, 0)
    x2, y2 = np.minimum(x2, camera.width), np.minimum(y2, height)
    visible = has_point & ~oversize & (x1 < x2) & (y1 < y2)
    return np.stack([x1, y1, x2, y2], axis=-1) * visible[..., None], visible


def project_boxes(
    objects: Sequence[ObjectGeoms], camera: Camera, params: RelationParams = RelationParams()
) -> tuple[np.ndarray, np.ndarray]:
    """One frame: boxes (N, 4) int64 and visibility (N,) of each object's geoms."""
    if camera.cam_to_world.ndim == 3 and len(camera.cam_to_world) != 1:
        raise ValueError(f"camera {camera.name!r} has {len(camera.cam_to_world)} poses; one frame needs one")
    boxes, visible = project_boxes_batch(GeomBatch.from_objects(objects), camera, params)
    return boxes[0], visible[0]
