"""Fiducial perception on live camera streams: what the ``fiducial_graphs`` node computes, without ROS.

The node hands in, per instant, the newest image (and aligned depth) of each camera and the newest joint states;
each camera's intrinsics come from its stream (camera_info: the stream's resolution, the calibration's distortion),
its extrinsic from its calibration file (the agent view in ``base_link``; the wrist camera on ``gripper_link``, placed
by forward kinematics at the joint states). Out come the tracked object poses (:class:`FiducialPerception`) and, per
camera, the graph and boxes of the perceived objects by the simulator's projection and relation rules
(:func:`graphs_from_poses`), boxes in the upright image as the camera topics carry it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from sgvla.core.state import Boxes, SceneState
from sgvla.scene_graph import Camera, Graph, ViewGraph
from sgvla.so101.hardware.calibration import CameraCalibration
from sgvla.so101.kinematics import BASE_LINK, Kinematics, rpy_matrix
from sgvla.so101.perception.fiducials import MarkerConfig
from sgvla.so101.perception.source import FIDUCIAL
from sgvla.so101.perception.poses import (
    CameraFrame, CameraModel, FiducialPerception, ObjectPose, camera_pose, graphs_from_poses, object_geoms,
)

GRIPPER_FRAME = "gripper_frame_link"  # the link a carried object follows
# The scene's end effector orientation is that of the MuJoCo model's ``gripperframe`` site (x out of the fingers, the
# jaws closing along z: the axes the pick-and-place controller's grasp offset and approach are in). The URDF's
# gripper_frame_link is the same point with other axes: the site is the link turned -90 degrees about its y axis.
EEF_FROM_GRIPPER_FRAME = rpy_matrix(0.0, -np.pi / 2, 0.0)


@dataclass(frozen=True)
class StreamImage:
    """One camera's newest image (H, W, 3) RGB and, where the camera has it, aligned depth (H, W) in metres (0: no
    reading)."""

    image: np.ndarray
    depth: np.ndarray | None = None


def upright_boxes(view: ViewGraph, height: int) -> ViewGraph:
    """Boxes in the upright image (row 0 = top) instead of the projection's rows-from-the-bottom convention."""
    boxes = {name: (x1, height - y2, x2, height - y1) for name, (x1, y1, x2, y2) in view.boxes.items()}
    return ViewGraph(view.camera, view.graph, boxes)


def perceived_scene(poses: Mapping[str, ObjectPose], markers: MarkerConfig, kinematics: Kinematics,
                    joints: Mapping[str, float], task: str, cameras: Mapping[str, Camera] | None = None) -> SceneState:
    """The scene as perceived: the tracked objects (positions, their configured extents as boxes and obstacles), the
    gripper frame by forward kinematics at ``joints`` (radians; its orientation in the simulator's end effector axes,
    `EEF_FROM_GRIPPER_FRAME`); what a scripted policy reads in place of the simulator's privileged scene."""
    names = [n for n in markers.objects if n in poses]
    geoms = object_geoms(poses, markers, names)
    gripper = kinematics.link_pose(GRIPPER_FRAME, joints)
    return SceneState(
        objects=tuple(names), positions=np.array([poses[n].position for n in names]).reshape(-1, 3), geoms=geoms,
        cameras=dict(cameras or {}), eef_pos=gripper[:3, 3].copy(), eef_mat=gripper[:3, :3] @ EEF_FROM_GRIPPER_FRAME,
        gripper_qpos=np.array([float(joints["gripper"])]), task=task,
        obstacles=Boxes(np.arange(len(names)), geoms.centers[0], geoms.rotations[0], geoms.half_sizes),
        source=FIDUCIAL)


class LivePerception:
    """Poses and graphs from the cameras' newest frames; a camera takes part once its intrinsics are known
    (:meth:`set_intrinsics`), a camera on a moving link once joint states are given too."""

    def __init__(self, markers: MarkerConfig, extrinsics: Mapping[str, CameraCalibration],
                 gripper_closed_below: float, kinematics: Kinematics | None = None) -> None:
        self.markers = markers
        self.extrinsics = dict(extrinsics)
        self.gripper_closed_below = float(gripper_closed_below)
        self.kinematics = kinematics or Kinematics()
        self.perception = FiducialPerception(markers)
        self.models: dict[str, CameraModel] = {}
        self.world_from_camera: dict[str, np.ndarray] = {}  # of the cameras used in the last update
        # cameras on a moving link (the wrist): placed only with joint states
        self.moving = {name for name, c in self.extrinsics.items()
                       if CameraModel.from_calibration(c).parent_frame != BASE_LINK}

    def set_intrinsics(self, camera: str, K: np.ndarray, distortion: np.ndarray, width: int, height: int) -> None:
        """The stream's intrinsics (its camera_info) with the calibration file's extrinsic."""
        if camera not in self.extrinsics:
            raise ValueError(f"no extrinsic calibration for camera {camera!r}; known: {sorted(self.extrinsics)}")
        model = self.models.get(camera)
        if model is not None and model.width == width and model.height == height and np.array_equal(model.K, K) \
                and np.array_equal(model.distortion, distortion):
            return
        base = CameraModel.from_calibration(self.extrinsics[camera])
        d = np.zeros(5) if len(distortion) == 0 else np.asarray(distortion, dtype=np.float64)
        self.models[camera] = dataclasses.replace(base, name=camera, K=np.asarray(K, dtype=np.float64).reshape(3, 3),
                                                  distortion=d, width=int(width), height=int(height))

    def waiting_for(self, joints: Mapping[str, float] | None) -> list[str]:
        """What keeps some camera out of the next update: its intrinsics, or joint states for one on a moving link.
        A live consumer waits for none of these before it publishes, or its first graphs lack those cameras'
        objects (an empty graph says "nothing there", not "not looked yet")."""
        missing = [f"{name} intrinsics" for name in self.extrinsics if name not in self.models]
        if joints is None and self.moving:
            missing.append("joint states")
        return missing

    def update(self, time_s: float, images: Mapping[str, StreamImage],
               joints: Mapping[str, float] | None) -> dict[str, ObjectPose]:
        """Tracked poses after this instant's images (those of cameras without intrinsics, or on a moving link
        without joint states, are left out); ``images`` may hold only the cameras with a new frame. ``joints`` in
        radians by URDF joint name."""
        frames = []
        self.world_from_camera = {}  # every camera whose place is known now: graphs are made for each
        # In the configured order, not the order the intrinsics came in: consumers index the cameras by position
        # (ObjectStates' camera_names, visible_in, boxes), so two runs of one rig must list them alike.
        for name in self.extrinsics:
            model = self.models.get(name)
            if model is None or (joints is None and model.parent_frame != BASE_LINK):
                continue
            pose = self.world_from_camera[name] = camera_pose(model, self.kinematics, joints)
            if name in images:
                frames.append(CameraFrame(model, images[name].image, pose, images[name].depth))
        gripper = self.kinematics.link_pose(GRIPPER_FRAME, joints) if joints is not None else None
        closed = joints is not None and joints.get("gripper", np.inf) < self.gripper_closed_below
        return self.perception.update(time_s, frames, gripper, closed)

    def graphs(self, poses: Mapping[str, ObjectPose], task: str) -> dict[str, ViewGraph]:
        """Per camera placed in the last update, the perceived objects' graph and boxes (upright image rows)."""
        cameras = {name: Camera(name, self.models[name].K, pose, self.models[name].width, self.models[name].height)
                   for name, pose in self.world_from_camera.items()}
        if not poses:
            return {name: ViewGraph(name, Graph.of([]), {}) for name in cameras}
        graphs = graphs_from_poses(poses, self.markers, cameras, task)
        return {name: upright_boxes(view, cameras[name].height) for name, view in graphs.items()}

    def scene(self, poses: Mapping[str, ObjectPose], task: str, joints: Mapping[str, float]) -> SceneState:
        """The scene as perceived (see :func:`perceived_scene`), with the cameras of the last update."""
        cameras = {name: Camera(name, self.models[name].K, pose, self.models[name].width, self.models[name].height)
                   for name, pose in self.world_from_camera.items()}
        return perceived_scene(poses, self.markers, self.kinematics, joints, task, cameras)

    def reset(self) -> None:
        self.perception.reset()
