"""A recorded LeRobot dataset (``sgvla record`` on the arm, or twin demos) replayed through the fiducial perception:
per frame, the perceived objects' poses and each camera's scene graph of them, where no simulator knows the truth.

Each episode is replayed through :class:`FiducialPerception` frame by frame, in order (the tracker holds occluded
objects), from the recorded images and joint states: the wrist camera is placed by forward kinematics at the
recorded joints, as live on the arm. Graphs come from the perceived poses by the simulator's projection and relation
rules (:func:`graphs_from_poses`). Carried objects are not followed (no gripper state is trusted offline): an object
hidden in the gripper is held at its last pose, then aged out. :mod:`sgvla.so101.perception.annotations` stores the
result beside the dataset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from sgvla.scene_graph import Camera
from sgvla.scene_graph.triplet import Graph
from sgvla.so101.hardware.joints import JOINTS, action_key, to_radians
from sgvla.so101.kinematics import Kinematics
from sgvla.so101.perception.fiducials import MarkerConfig
from sgvla.so101.perception.poses import (
    CameraFrame, CameraModel, FiducialPerception, ObjectPose, camera_pose, graphs_from_poses,
)
from sgvla.vlm.frames import LeRobotSource

STATE = "observation.state"


@dataclass(frozen=True)
class PerceivedFrame:
    """One frame's perception: the tracked poses at ``time_s`` (the frame's timestamp), for each of them the dataset
    cameras that saw a marker of it in this frame (none: held from an earlier sighting), and per dataset camera the
    graph of the perceived objects."""

    time_s: float
    poses: dict[str, ObjectPose]
    seen_by: dict[str, tuple[str, ...]]
    graphs: dict[str, Graph]


def dataset_source(root, cameras: Mapping[str, CameraModel]) -> LeRobotSource:
    """The dataset at `root` with the given cameras (dataset camera name -> model), checked to hold the SO101's
    joint states."""
    source = LeRobotSource(root, {f"observation.images.{name}": name for name in cameras})
    if STATE not in source.dataset.meta.features or source.dataset.meta.features[STATE].get("names") not in (
            None, [action_key(j) for j in JOINTS]):
        raise ValueError(f"{root}: {STATE} is not the SO101's six joints {[action_key(j) for j in JOINTS]}")
    return source


def replay_episode(source: LeRobotSource, episode: int, cameras: Mapping[str, CameraModel], markers: MarkerConfig,
                   kinematics: Kinematics, task: str) -> list[PerceivedFrame]:
    """Per frame of one episode (dataset camera name -> its model at the recorded size), what perception made of
    the frames up to it."""
    dataset = source.dataset
    length = int(dataset.meta.episodes[episode]["length"])
    images = {name: source.images(str(episode), name, range(length)) for name in cameras}
    for name, camera in cameras.items():
        shape = images[name].shape[1:3]
        if shape != (camera.height, camera.width):
            raise ValueError(f"camera {name!r}: the dataset's images are {shape[1]}x{shape[0]}, its camera model is "
                             f"{camera.width}x{camera.height}; scale the calibration to the recorded size")
    start = int(dataset.meta.episodes[episode]["dataset_from_index"])
    rows = dataset.hf_dataset.select_columns(STATE)[start:start + length][STATE]
    states = np.stack([np.asarray(row, dtype=np.float64) for row in rows])
    dataset_name = {camera.name: name for name, camera in cameras.items()}  # perception names cameras by model
    perception = FiducialPerception(markers)
    out = []
    for frame in range(length):
        time_s = frame / dataset.meta.fps
        joints = dict(zip(JOINTS, to_radians({j: states[frame][i] for i, j in enumerate(JOINTS)})))
        views = [CameraFrame(camera, images[name][frame], camera_pose(camera, kinematics, joints))
                 for name, camera in cameras.items()]
        poses = perception.update(time_s, views)
        seen_by = {n: tuple(sorted({dataset_name[s.camera] for s in perception.last_sightings if s.name == n}))
                   for n in poses}
        if not poses:
            out.append(PerceivedFrame(time_s, poses, seen_by, {name: Graph.of([]) for name in cameras}))
            continue
        graph_cameras = {f.camera.name: Camera(f.camera.name, f.camera.K, f.world_from_camera, f.camera.width,
                                               f.camera.height) for f in views}
        graphs = graphs_from_poses(poses, markers, graph_cameras, task)
        out.append(PerceivedFrame(time_s, poses, seen_by,
                                  {name: graphs[camera.name].graph for name, camera in cameras.items()}))
    return out
