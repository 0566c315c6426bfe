"""Fiducial scene graphs of a recorded LeRobot dataset (``sgvla record`` on the arm, or twin demos): the reference
that ``sgvla vlm-bench`` scores VLM graphs of real frames against, where no simulator knows the truth.

Each episode is replayed through :class:`FiducialPerception` frame by frame, in order (the tracker holds occluded
objects), from the recorded images and joint states: the wrist camera is placed by forward kinematics at the
recorded joints, as live on the arm. Graphs come from the perceived poses by the simulator's projection and relation
rules (:func:`graphs_from_poses`) and are stored beside the dataset as its ``fiducial`` reference graphs
(`sgvla.vlm.resource.reference_folder`). Carried objects are not followed (no gripper state is trusted offline):
an object hidden in the gripper is held at its last pose, then aged out.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from sgvla.scene_graph import Camera
from sgvla.scene_graph.triplet import Graph
from sgvla.so101.hardware.joints import JOINTS, action_key, to_radians
from sgvla.so101.kinematics import Kinematics
from sgvla.so101.perception.fiducials import MarkerConfig
from sgvla.so101.perception.poses import CameraFrame, CameraModel, FiducialPerception, camera_pose, graphs_from_poses
from sgvla.vlm.frames import LeRobotSource
from sgvla.vlm.resource import append_reference_graphs, reference_folder

STATE = "observation.state"


def episode_fiducial_graphs(source: LeRobotSource, episode: int, cameras: Mapping[str, CameraModel],
                            markers: MarkerConfig, kinematics: Kinematics, task: str) -> list[dict[str, Graph]]:
    """Per frame of one episode, camera name -> the graph of the objects perceived up to that frame."""
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
    perception = FiducialPerception(markers)
    out = []
    for frame in range(length):
        joints = dict(zip(JOINTS, to_radians({j: states[frame][i] for i, j in enumerate(JOINTS)})))
        views = [CameraFrame(camera, images[name][frame], camera_pose(camera, kinematics, joints))
                 for name, camera in cameras.items()]
        poses = perception.update(frame / dataset.meta.fps, views)
        if not poses:
            out.append({name: Graph.of([]) for name in cameras})
            continue
        graph_cameras = {f.camera.name: Camera(f.camera.name, f.camera.K, f.world_from_camera, f.camera.width,
                                               f.camera.height) for f in views}
        graphs = graphs_from_poses(poses, markers, graph_cameras, task)
        out.append({name: graphs[camera.name].graph for name, camera in cameras.items()})
    return out


def write_fiducial_graphs(root: str | Path, cameras: Mapping[str, CameraModel], markers: MarkerConfig,
                          kinematics: Kinematics | None = None) -> Path:
    """The fiducial graphs of every episode and camera (dataset camera name -> its model at the recorded size) of
    the LeRobot dataset at `root`, written (anew) as its ``fiducial`` reference graphs; returns their file."""
    source = LeRobotSource(root, {f"observation.images.{name}": name for name in cameras})
    if STATE not in source.dataset.meta.features or source.dataset.meta.features[STATE].get("names") not in (
            None, [action_key(j) for j in JOINTS]):
        raise ValueError(f"{root}: {STATE} is not the SO101's six joints {[action_key(j) for j in JOINTS]}")
    kinematics = kinematics or Kinematics()
    path = reference_folder(root, "fiducial") / "graphs.jsonl"
    path.unlink(missing_ok=True)
    for episode in source.episodes():
        graphs = episode_fiducial_graphs(source, int(episode.episode), cameras, markers, kinematics, episode.task)
        append_reference_graphs(root, "fiducial", int(episode.episode), graphs)
    return path
