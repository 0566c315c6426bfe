"""Fiducial perception checked against the twin's ground truth over scripted pick-and-place (issue 15.4).

The twin's objects wear the configured markers; each control step of :class:`TwinPickPlace` the cameras render RGB
(and depth), :class:`FiducialPerception` turns them into object poses (the wrist camera placed by forward kinematics
at the twin's joint positions, as on the arm: never the simulator's camera pose), and every object's perceived pose
is compared with its body's pose. Graphs are made from the perceived poses by the same projection and relation rules
as the ground truth (:func:`graphs_from_poses`) and scored against the twin's ground-truth graphs by exact-triplet
F1 (bowl-swap invariant); graphs from the true poses with the configured extents give the F1 that the extents alone
allow. Per object and frame the status is ``seen`` (a marker of it in a camera now), ``held`` (kept from an earlier
sighting, under ``max_age_s``), ``carried`` (unseen in the closed gripper, following its pose from forward kinematics)
or ``missing``. The gripper counts as closed below the middle of the scripted grasp's open and closed angles.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from sgvla.scene_graph import Camera
from sgvla.scene_graph.metrics import score_frame
from sgvla.scene_graph.ontology import Ontology, load_ontology
from sgvla.so101.cameras import CAMERAS
from sgvla.so101.hardware.calibration import load_camera_calibration
from sgvla.so101.hardware.joints import JOINTS
from sgvla.so101.kinematics import Kinematics
from sgvla.so101.perception.fiducials import MarkerConfig
from sgvla.so101.perception.live import GRIPPER_FRAME
from sgvla.so101.perception.poses import (
    CameraFrame, CameraModel, FiducialPerception, ObjectPose, camera_pose, graphs_from_poses,
)
from sgvla.so101.twin.config import TARGET, TwinConfig
from sgvla.so101.twin.pick_place import PickPlaceParams, TwinPickPlace
from sgvla.so101.twin.scene import main_body
from sgvla.so101.twin.twin import So101Twin

STATUSES = ("seen", "held", "carried", "missing")


@dataclass(frozen=True)
class FrameCheck:
    """One control step: per object its status and position error (m; None when missing), the graphs' F1 per
    camera (perceived poses; true poses with the configured extents), and the seconds perception took."""

    task_id: int
    step: int
    status: dict[str, str]
    error: dict[str, float | None]
    f1: dict[str, float]
    f1_true_poses: dict[str, float]
    perception_s: float
    images: int


def twin_cameras(twin: So101Twin, width: int, height: int) -> dict[str, CameraModel]:
    """The twin's cameras as perception sees them: the calibration files' extrinsics, the renderer's pinhole
    intrinsics (the twin draws no lens distortion)."""
    files = twin.config.calibration_files()
    return {name: dataclasses.replace(CameraModel.from_calibration(load_camera_calibration(files[name])),
                                      K=twin.intrinsics(name, width, height), distortion=np.zeros(5), width=width,
                                      height=height) for name in twin.cameras}


def true_poses(twin: So101Twin) -> dict[str, ObjectPose]:
    poses = {}
    for name in twin.index.names:
        body = twin.model.body(main_body(name)).id
        pose = np.eye(4)
        pose[:3, :3], pose[:3, 3] = twin.data.xmat[body].reshape(3, 3), twin.data.xpos[body]
        poses[name] = ObjectPose(name, pose, 0.0, 0, 0.0)
    return poses


def _f1(pred, truth, ontology: Ontology) -> dict[str, float]:
    return {view: score_frame(pred[view].graph, truth[view].graph, ontology).f1 for view in truth}


def check_episode(config: TwinConfig, markers: MarkerConfig, task_id: int, seed: int, *, width: int = 640,
                  height: int = 480, depth: bool = True, every: int = 1, max_steps: int = 300,
                  views: Sequence[str] = CAMERAS, kinematics: Kinematics | None = None,
                  ontology: Ontology | None = None) -> Iterator[FrameCheck]:
    """Frames of one scripted pick-and-place of task ``task_id`` (every ``every``-th control step, until the bowl
    is placed or ``max_steps``); perception runs on ``views``."""
    kinematics = kinematics or Kinematics()
    ontology = ontology or load_ontology("so101_tabletop")
    twin = So101Twin(config, task_id)
    try:
        twin.reset(seed)
        cameras = {v: c for v, c in twin_cameras(twin, width, height).items() if v in views}
        perception = FiducialPerception(markers)
        controller = TwinPickPlace(twin.model, config, TARGET, twin.layout.place)
        for step in range(max_steps):
            if step % every == 0:
                yield _check_frame(twin, cameras, perception, kinematics, ontology, markers, task_id, step, depth)
            twin.set_joint_targets(dict(zip(JOINTS, controller.act(twin.scene()))))
            twin.advance(twin.control_period)
            if controller.done:
                break
    finally:
        twin.close()


def _check_frame(twin: So101Twin, cameras: dict[str, CameraModel], perception: FiducialPerception,
                 kinematics: Kinematics, ontology: Ontology, markers: MarkerConfig, task_id: int, step: int,
                 depth: bool) -> FrameCheck:
    now = step * twin.control_period
    joints = twin.joint_positions()
    frames = []
    for name, camera in cameras.items():
        image = twin.render(name, camera.width, camera.height)
        depth_image = twin.render_depth(name, camera.width, camera.height) if depth else None
        frames.append(CameraFrame(camera, image, camera_pose(camera, kinematics, joints), depth_image))
    gripper = kinematics.link_pose(GRIPPER_FRAME, joints)
    closed = joints["gripper"] < PickPlaceParams().closed_below
    start = time.perf_counter()
    poses = perception.update(now, frames, gripper, closed)
    elapsed = time.perf_counter() - start
    seen = {s.name for s in perception.last_sightings}
    truth = true_poses(twin)
    status = {n: "seen" if n in seen else "missing" if n not in poses else "carried" if poses[n].carried else "held"
              for n in truth}
    error = {n: float(np.linalg.norm(poses[n].position - truth[n].position)) if n in poses else None for n in truth}
    graph_cameras = {f.camera.name: Camera(f.camera.name, f.camera.K, f.world_from_camera, f.camera.width,
                                           f.camera.height) for f in frames}
    reference = twin.ground_truth(list(cameras))
    names = twin.index.names
    perceived = graphs_from_poses(poses, markers, graph_cameras, twin.task, names)
    ideal = graphs_from_poses(truth, markers, graph_cameras, twin.task, names)
    return FrameCheck(task_id, step, status, error, _f1(perceived, reference, ontology), _f1(ideal, reference, ontology),
                      elapsed, len(frames))


@dataclass(frozen=True)
class CheckSummary:
    frames: int
    images: int
    median_mm: float  # over objects seen in the frame
    p95_mm: float
    held_median_mm: float  # over objects kept through an occlusion
    carried_median_mm: float  # over objects following the closed gripper
    status_counts: dict[str, int]
    f1: dict[str, float]  # mean frame F1 per camera
    f1_true_poses: dict[str, float]
    ms_per_image: float
    ms_per_frame: float


def summarize(frames: Sequence[FrameCheck]) -> CheckSummary:
    if not frames:
        raise ValueError("no frames to summarize")
    seen = np.array([e for f in frames for n, e in f.error.items() if f.status[n] == "seen"]) * 1000
    held = np.array([e for f in frames for n, e in f.error.items() if f.status[n] == "held"]) * 1000
    carried = np.array([e for f in frames for n, e in f.error.items() if f.status[n] == "carried"]) * 1000
    counts = {s: sum(list(f.status.values()).count(s) for f in frames) for s in STATUSES}
    views = list(frames[0].f1)
    total_s = sum(f.perception_s for f in frames)
    return CheckSummary(
        frames=len(frames), images=sum(f.images for f in frames),
        median_mm=float(np.median(seen)) if len(seen) else float("nan"),
        p95_mm=float(np.percentile(seen, 95)) if len(seen) else float("nan"),
        held_median_mm=float(np.median(held)) if len(held) else float("nan"),
        carried_median_mm=float(np.median(carried)) if len(carried) else float("nan"),
        status_counts=counts,
        f1={v: float(np.mean([f.f1[v] for f in frames])) for v in views},
        f1_true_poses={v: float(np.mean([f.f1_true_poses[v] for f in frames])) for v in views},
        ms_per_image=1000 * total_s / sum(f.images for f in frames), ms_per_frame=1000 * total_s / len(frames))
