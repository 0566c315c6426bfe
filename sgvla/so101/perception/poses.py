"""Object poses in ``base_link`` from the ArUco markers the cameras see: detection, PnP, fusion, tracking.

Per camera and frame: the markers are detected (OpenCV ArUco; corners refined to sub-pixel) and each object seen
gets one pose in the camera from PnP on the corners of all of its markers in view, placed in the object's frame by
``config/perception/`` (IPPE on each single marker gives two candidates each; the one that best reprojects all the
corners seeds an iterative refinement over all of them, so an object's markers far apart pin its rotation better
than any one of them). Where an aligned depth image is given, the object is moved along its viewing ray by the
ratio of measured to predicted depth over its markers (PnP is weakest along the ray: a small marker's size in
pixels pins its distance least). The camera's pose in ``base_link`` (the agent view's calibrated extrinsic; the
wrist camera's from forward kinematics at the current joint states, see :func:`camera_pose`) puts the pose in
``base_link``.

Fusion: an object's estimates from several cameras are weighted by 1 / ((e + 0.5 px)^2 d^2), e the RMS reprojection
error and d the distance, i.e. by how many pixels a unit of pose error moves; positions are the weighted mean, the
rotation that of the best-weighted estimate. Tracking: a pose is kept while its markers are
hidden (the gripper over them) for at most ``max_age_s`` since the last sighting, then dropped, so an object that
left the table or lost its marker does not linger in the graphs; an object in the closed gripper's jaws follows the
gripper's pose from forward kinematics while its markers are hidden (:class:`PoseTracker`). Only a frame that could
have shown an object (its last pose inside that camera's image) counts against it: cameras deliver frames at their
own rates, and a loaded machine renders or reads a camera far slower than another, so a wrist camera's frames that
never see the bowls must not age out what only the agent view's (late) frames see.

Graphs from perceived poses (:func:`graphs_from_poses`) use the simulator's projection and relation rules
(:func:`sgvla.scene_graph.ground_truth_batch`) with each object's configured extent as its box.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
import dataclasses
from dataclasses import dataclass

import cv2
import numpy as np

from sgvla.scene_graph import Camera, GeomBatch, ViewGraph, ground_truth_batch
from sgvla.so101.hardware.calibration import CameraCalibration
from sgvla.so101.kinematics import BASE_LINK, Kinematics, quaternion_matrix, transform
from sgvla.so101.perception.fiducials import MarkerConfig

ERROR_FLOOR_PX = 0.5  # reprojection error below which a marker is not trusted more (pixel quantization)
DEPTH_INNER = 0.6  # fraction of the marker's square (about its centre) whose depth is read
MIN_DEPTH_PIXELS = 4


@dataclass(frozen=True, eq=False)
class CameraModel:
    """Intrinsics of one camera stream: ``K`` (3, 3) and OpenCV distortion coefficients; the extrinsic is where the
    camera sits (``parent_frame`` <- optical frame, fixed)."""

    name: str
    K: np.ndarray
    distortion: np.ndarray
    width: int
    height: int
    parent_frame: str = BASE_LINK
    parent_from_camera: np.ndarray | None = None

    @classmethod
    def from_calibration(cls, calibration: CameraCalibration, width: int | None = None,
                         height: int | None = None) -> CameraModel:
        """From a `sgvla calibrate camera` file (scaled to another stream size if given)."""
        if calibration.parent_frame == "":
            raise ValueError(f"camera {calibration.camera_name!r}: its calibration has no extrinsics "
                             "(parent_frame, translation, rotation_xyzw); poses need the camera's place")
        cal = calibration.scaled_to(width or calibration.width, height or calibration.height)
        return cls(cal.camera_name, np.array(cal.k).reshape(3, 3), np.array(cal.d, dtype=np.float64), cal.width,
                   cal.height, cal.parent_frame,
                   transform(quaternion_matrix(cal.rotation_xyzw), cal.translation))


def in_view(camera: CameraModel, world_from_camera: np.ndarray, point: np.ndarray) -> bool:
    """Whether a point of base_link projects into the camera's image (in front of it, inside its pixels)."""
    x, y, z = (np.linalg.inv(world_from_camera) @ np.append(np.asarray(point, dtype=np.float64), 1.0))[:3]
    if z <= 0:
        return False
    u, v, w = camera.K @ [x, y, z]
    return 0 <= u / w < camera.width and 0 <= v / w < camera.height


def camera_pose(camera: CameraModel, kinematics: Kinematics | None = None,
                joints: Mapping[str, float] | None = None) -> np.ndarray:
    """(4, 4) base_link-from-optical-frame: the extrinsic, after forward kinematics to its parent frame when that is
    a moving link (the wrist camera on ``gripper_link``)."""
    if camera.parent_from_camera is None:
        raise ValueError(f"camera {camera.name!r} has no extrinsic")
    if camera.parent_frame == BASE_LINK:
        return camera.parent_from_camera
    if kinematics is None or joints is None:
        raise ValueError(f"camera {camera.name!r} sits on {camera.parent_frame!r}: its pose needs the kinematics "
                         "and the current joint positions")
    return kinematics.link_pose(camera.parent_frame, joints) @ camera.parent_from_camera


@dataclass(frozen=True, eq=False)
class Sighting:
    """One object seen by one camera: its pose in the camera (4, 4) from the corners of all of its markers that
    camera sees, the RMS reprojection error (px), its distance (m) and which markers made it."""

    name: str
    camera: str
    camera_from_object: np.ndarray
    error_px: float
    distance: float
    marker_ids: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class ObjectPose:
    """An object's pose in base_link (4, 4); ``seen_at`` is when a marker of it was last seen, ``markers`` how many
    marker sightings made it, ``error_px`` the best of their reprojection errors."""

    name: str
    pose: np.ndarray
    seen_at: float
    markers: int
    error_px: float
    carried: bool = False  # following the closed gripper while unseen (see PoseTracker)

    @property
    def position(self) -> np.ndarray:
        return self.pose[:3, 3]


def _gray(image: np.ndarray) -> np.ndarray:
    if image.ndim == 2:
        return image
    if image.ndim == 3 and image.shape[2] == 3:
        return cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    raise ValueError(f"expected an (H, W) gray or (H, W, 3) RGB image, got shape {image.shape}")


class MarkerDetector:
    """ArUco detection and per-object PnP for the configured markers (others are ignored)."""

    def __init__(self, config: MarkerConfig) -> None:
        self.config = config
        params = cv2.aruco.DetectorParameters()
        params.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
        self._detector = cv2.aruco.ArucoDetector(config.aruco_dictionary, params)
        # Each marker's corners in its object's frame, in the detector's order.
        self._object_points = {
            marker.id: (marker.object_from_marker @ np.c_[marker.corners(), np.ones(4)].T)[:3].T
            for obj in config.objects.values() for marker in obj.markers}

    def markers(self, image: np.ndarray, camera: CameraModel) -> dict[int, np.ndarray]:
        """Configured marker id -> its corners (4, 2) in pixels, in one upright image (RGB or gray)."""
        gray = _gray(image)
        if gray.shape != (camera.height, camera.width):
            raise ValueError(f"camera {camera.name!r}: image is {gray.shape[1]}x{gray.shape[0]}, its intrinsics are "
                             f"for {camera.width}x{camera.height}")
        corners, ids, _ = self._detector.detectMarkers(gray)
        if ids is None:
            return {}
        found = {}
        for quad, marker_id in zip(corners, ids.ravel().tolist()):
            if marker_id in self.config.by_id and marker_id not in found:  # a duplicate print: the first one
                found[marker_id] = quad.reshape(4, 2).astype(np.float64)
        return found

    def detect(self, image: np.ndarray, camera: CameraModel, world_from_camera: np.ndarray | None = None,
               depth: np.ndarray | None = None) -> list[Sighting]:
        """The objects whose markers show in ``image``. With the camera's pose in base_link (``world_from_camera``),
        objects configured ``upright`` get the best pose among those turned only about base z (see
        :meth:`_solve`); ``depth`` (H, W) metres along the optical axis, aligned to the image, refines each one's
        distance (0 or non-finite = no reading)."""
        by_object: dict[str, list[int]] = {}
        quads = self.markers(image, camera)
        for marker_id in quads:
            by_object.setdefault(self.config.by_id[marker_id][0], []).append(marker_id)
        sightings = []
        for name, ids in by_object.items():
            upright = world_from_camera if self.config.objects[name].upright else None
            solved = self._solve(ids, quads, camera, upright)
            if solved is None:
                continue
            camera_from_object, error = solved
            if depth is not None:
                camera_from_object = self._depth_refined(camera_from_object, ids, quads, depth, camera)
            sightings.append(Sighting(name, camera.name, camera_from_object, error,
                                      float(np.linalg.norm(camera_from_object[:3, 3])), tuple(sorted(ids))))
        return sightings

    def _solve(self, ids: list[int], quads: Mapping[int, np.ndarray], camera: CameraModel,
               world_from_camera: np.ndarray | None) -> tuple[np.ndarray, float] | None:
        """Candidates: IPPE on each marker alone (two solutions each) and, with several markers, an iterative
        refinement on all corners from the best of them. With ``world_from_camera`` every candidate is first turned
        upright (see :func:`upright`). The candidate that best reprojects all of the object's corners wins: a small
        or oblique marker's two IPPE solutions fit its corners almost equally well, an upright one mostly does not."""
        points = np.concatenate([self._object_points[i] for i in ids])
        pixels = np.concatenate([quads[i] for i in ids])
        centroid = points.mean(axis=0)
        candidates = []
        for i in ids:
            placement = self.config.by_id[i][1]
            count, rvecs, tvecs, _ = cv2.solvePnPGeneric(placement.corners(), quads[i], camera.K, camera.distortion,
                                                         flags=cv2.SOLVEPNP_IPPE_SQUARE)
            inverse = np.linalg.inv(placement.object_from_marker)
            candidates += [transform(cv2.Rodrigues(r)[0], np.ravel(t)) @ inverse for r, t in zip(rvecs[:count],
                                                                                                    tvecs[:count])]
        candidates = [c for c in candidates if c[2, 3] > 0]
        if not candidates:
            return None
        if len(ids) > 1:
            seed = min(candidates, key=lambda c: _rms(points, pixels, c, camera))
            ok, rvec, tvec = cv2.solvePnP(points, pixels, camera.K, camera.distortion, cv2.Rodrigues(seed[:3, :3])[0],
                                          seed[:3, 3].reshape(3, 1).copy(), useExtrinsicGuess=True,
                                          flags=cv2.SOLVEPNP_ITERATIVE)
            if ok:
                candidates.append(transform(cv2.Rodrigues(rvec)[0], np.ravel(tvec)))
        if world_from_camera is not None:
            camera_from_world = np.linalg.inv(world_from_camera)
            candidates = [camera_from_world @ upright(world_from_camera @ c, centroid) for c in candidates]
        errors = [_rms(points, pixels, c, camera) for c in candidates]
        best = int(np.argmin(errors))
        pose = candidates[best]
        return (pose, errors[best]) if pose[2, 3] > 0 else None

    def _depth_refined(self, camera_from_object: np.ndarray, ids: list[int], quads: Mapping[int, np.ndarray],
                       depth: np.ndarray, camera: CameraModel) -> np.ndarray:
        """The object moved along its viewing ray by the median ratio of measured to predicted depth over its markers'
        inner areas (unchanged without readings): PnP is weakest along the ray."""
        ratios = []
        for i in ids:
            measured = _median_depth(quads[i], depth, camera)
            predicted = (camera_from_object @ np.r_[self._object_points[i].mean(axis=0), 1.0])[2]
            if measured is not None and predicted > 0:
                ratios.append(measured / predicted)
        if not ratios:
            return camera_from_object
        refined = camera_from_object.copy()
        refined[:3, 3] *= float(np.median(ratios))
        return refined


def upright(world_from_object: np.ndarray, centroid: np.ndarray) -> np.ndarray:
    """The pose turned to stand upright (only its heading about base z kept), about the point ``centroid`` (object
    frame: its markers' centre, the best-measured point), which stays where it was."""
    x = world_from_object[:3, 0]
    if np.hypot(x[0], x[1]) < 1e-6:  # lying on its side: no heading to keep
        return world_from_object
    yaw = np.arctan2(x[1], x[0])
    rotation = np.array([[np.cos(yaw), -np.sin(yaw), 0.0], [np.sin(yaw), np.cos(yaw), 0.0], [0.0, 0.0, 1.0]])
    at = world_from_object[:3, :3] @ centroid + world_from_object[:3, 3]
    return transform(rotation, at - rotation @ centroid)


def _rms(points: np.ndarray, pixels: np.ndarray, camera_from_object: np.ndarray, camera: CameraModel) -> float:
    rvec = cv2.Rodrigues(camera_from_object[:3, :3])[0]
    projected, _ = cv2.projectPoints(points, rvec, camera_from_object[:3, 3], camera.K, camera.distortion)
    return float(np.sqrt(np.mean(np.sum((projected.reshape(-1, 2) - pixels) ** 2, axis=1))))


def _median_depth(quad: np.ndarray, depth: np.ndarray, camera: CameraModel) -> float | None:
    """Median depth over the inner part of a marker's quad, or None with too few readings."""
    centre = quad.mean(axis=0)
    inner = (centre + DEPTH_INNER * (quad - centre)).round().astype(np.int32)
    x0, y0 = np.maximum(inner.min(axis=0), 0)
    x1, y1 = np.minimum(inner.max(axis=0) + 1, [camera.width, camera.height])
    if x1 <= x0 or y1 <= y0:
        return None
    mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
    cv2.fillConvexPoly(mask, inner - [x0, y0], 1)
    values = depth[y0:y1, x0:x1][mask.astype(bool)]
    values = values[np.isfinite(values) & (values > 0)]
    return float(np.median(values)) if len(values) >= MIN_DEPTH_PIXELS else None


def fuse(sightings: Sequence[Sighting], world_from_camera: Mapping[str, np.ndarray],
         time_s: float) -> dict[str, ObjectPose]:
    """One pose in base_link per object seen: the cameras' estimates weighted by 1 / ((e + 0.5 px)^2 d^2); the
    weighted mean position, the rotation of the best-weighted estimate."""
    grouped: dict[str, list[tuple[np.ndarray, float, Sighting]]] = {}
    for s in sightings:
        pose = world_from_camera[s.camera] @ s.camera_from_object
        grouped.setdefault(s.name, []).append((pose, 1.0 / ((s.error_px + ERROR_FLOOR_PX) ** 2 * s.distance ** 2), s))
    fused = {}
    for name, items in grouped.items():
        poses = np.stack([p for p, _, _ in items])
        weights = np.array([w for _, w, _ in items])
        pose = poses[int(np.argmax(weights))].copy()
        pose[:3, 3] = (weights[:, None] * poses[:, :3, 3]).sum(axis=0) / weights.sum()
        fused[name] = ObjectPose(name, pose, time_s, sum(len(s.marker_ids) for _, _, s in items),
                                 min(s.error_px for _, _, s in items))
    return fused


class PoseTracker:
    """The latest pose of every object, kept ``max_age_s`` after its last sighting, then dropped.

    An object the closed gripper holds is carried instead: while the gripper is closed and carries nothing, the
    object nearest to the gripper frame (seen or not), if it is within ``carry_radius`` and not seen now, is attached
    to the gripper at its held pose (where it was last seen: it has not moved since, or it would have been seen
    moving); while the gripper stays closed and the object unseen, its pose follows the gripper (from forward kinematics, a
    measurement like a sighting: ``seen_at`` is refreshed, ``carried`` set). A sighting or the gripper opening ends
    the carry; from then on the usual age applies. So a bowl in the jaws, its marker hidden by them, is neither left
    behind where it was picked nor dropped after ``max_age_s``."""

    def __init__(self, max_age_s: float, carry_radius: float = 0.08) -> None:
        if not max_age_s >= 0:
            raise ValueError(f"max_age_s must be >= 0 seconds, got {max_age_s}")
        self.max_age_s, self.carry_radius = float(max_age_s), float(carry_radius)
        self._poses: dict[str, ObjectPose] = {}
        self._carried: dict[str, np.ndarray] = {}  # name -> gripper-from-object

    def update(self, time_s: float, seen: Mapping[str, ObjectPose], gripper: np.ndarray | None = None,
               gripper_closed: bool = False, looked: Container[str] | None = None) -> dict[str, ObjectPose]:
        """Poses at ``time_s`` after this frame's sightings (kept ones carry their older ``seen_at``); ``gripper``
        (4, 4) is the gripper frame in base_link now, ``gripper_closed`` whether its jaws are closed; ``looked``
        the unseen objects this instant's frames could have shown (None: all of them), the only ones that age."""
        self._poses.update(seen)
        for name in seen:
            self._carried.pop(name, None)
        closed = gripper is not None and gripper_closed
        if not closed:  # released: what was carried stays where it was let go, as a held pose
            for name in self._carried:
                if name in self._poses and name not in seen:
                    self._poses[name] = dataclasses.replace(self._poses[name], carried=False)
            self._carried.clear()
        elif not self._carried and self._poses:
            distances = {n: float(np.linalg.norm(p.position - gripper[:3, 3])) for n, p in self._poses.items()}
            nearest = min(distances, key=distances.get)
            if nearest not in seen and distances[nearest] <= self.carry_radius:
                self._carried[nearest] = np.linalg.inv(gripper) @ self._poses[nearest].pose
        for name, relative in self._carried.items():
            if name in self._poses:
                old = self._poses[name]
                self._poses[name] = ObjectPose(name, gripper @ relative, time_s, 0, old.error_px, carried=True)
        self._poses = {n: p for n, p in self._poses.items()
                       if time_s - p.seen_at <= self.max_age_s or (looked is not None and n not in looked)}
        self._carried = {n: r for n, r in self._carried.items() if n in self._poses}
        return dict(self._poses)

    @property
    def poses(self) -> dict[str, ObjectPose]:
        return dict(self._poses)

    def reset(self) -> None:
        self._poses.clear()
        self._carried.clear()


@dataclass(frozen=True)
class CameraFrame:
    """One camera's image at one instant, its pose in base_link and, where the camera has it, aligned depth."""

    camera: CameraModel
    image: np.ndarray
    world_from_camera: np.ndarray
    depth: np.ndarray | None = None


class FiducialPerception:
    """Detection, PnP, fusion over the cameras and tracking: :meth:`update` per instant gives the tracked poses."""

    def __init__(self, config: MarkerConfig, max_age_s: float | None = None) -> None:
        self.config = config
        self.detector = MarkerDetector(config)
        self.tracker = PoseTracker(config.max_age_s if max_age_s is None else max_age_s, config.carry_radius)
        self.last_sightings: list[Sighting] = []

    def update(self, time_s: float, frames: Sequence[CameraFrame], gripper: np.ndarray | None = None,
               gripper_closed: bool = False) -> dict[str, ObjectPose]:
        """Tracked poses after the cameras' frames of one instant (``gripper``: see :meth:`PoseTracker.update`)."""
        self.last_sightings = [s for f in frames
                               for s in self.detector.detect(f.image, f.camera, f.world_from_camera, f.depth)]
        poses = {f.camera.name: f.world_from_camera for f in frames}
        seen = fuse(self.last_sightings, poses, time_s)
        looked = {name for name, pose in self.tracker.poses.items() if name not in seen
                  and any(in_view(f.camera, f.world_from_camera, pose.position) for f in frames)}
        return self.tracker.update(time_s, seen, gripper, gripper_closed, looked)

    def reset(self) -> None:
        self.tracker.reset()
        self.last_sightings = []


def object_geoms(poses: Mapping[str, ObjectPose], config: MarkerConfig,
                 names: Sequence[str]) -> GeomBatch:
    """One box per object of ``names`` (the configured extent, centred above the pose's origin), one frame."""
    centers, rotations, halves = [], [], []
    for name in names:
        obj, pose = config.objects[name], poses[name].pose
        half = np.array(obj.half_size if not obj.cylinder else [obj.half_size[0]] * 2 + [obj.half_size[2]])
        centers.append(pose[:3, :3] @ [0.0, 0.0, half[2]] + pose[:3, 3])
        rotations.append(pose[:3, :3])
        halves.append(half)
    return GeomBatch(np.arange(len(names)), np.array(centers).reshape(1, -1, 3),
                     np.array(rotations).reshape(1, -1, 3, 3), np.array(halves).reshape(-1, 3), len(names))


def graphs_from_poses(poses: Mapping[str, ObjectPose], config: MarkerConfig, cameras: Mapping[str, Camera],
                      task: str, names: Sequence[str] | None = None) -> dict[str, ViewGraph]:
    """Per camera, the graph and boxes (rows from the bottom, as the projection gives them) of the perceived objects
    (``names`` orders them; default: the configured order), by the simulator's projection and relation rules."""
    names = [n for n in (names or config.objects) if n in poses]
    unknown = sorted(set(poses) - set(config.objects))
    if unknown:
        raise ValueError(f"poses of unconfigured objects {unknown}; configured: {list(config.objects)}")
    positions = np.array([poses[n].position for n in names]).reshape(1, -1, 3)
    batch = ground_truth_batch(names, object_geoms(poses, config, names), positions, cameras, task)
    return {view: graphs.frame(0) for view, graphs in batch.items()}
