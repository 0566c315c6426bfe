"""The twin's objects as its cameras perceive them: what the so101_twin suite's ``perception: true`` puts in place of
the simulator's object state (the meaning so101_hardware's ``perception: true`` has on the arm).

Every control step (the reset's first observation included) the twin renders each camera at its image size (the twin
config's, or the suite's ``image_size``) in RGB, with depth for the cameras that have it on the twin rig
(config/hardware/twin.yaml: the agent view), and :class:`LivePerception` (`sgvla.so101.perception.live`, what the
``fiducial_graphs`` node runs on the arm) turns them into tracked object poses: intrinsics are the renderer's pinhole
model, extrinsics the calibration files, the wrist camera is placed by forward kinematics at the twin's joint
positions, the gripper's carry rule reads its joint. Nothing of the simulator's object or camera state is read.

The backend's scene is then :meth:`TwinPerception.scene` (the perceived objects with their configured extents,
`perceived_scene`), so scripted policies read perceived objects in process and over topics alike (the sim_bridge
publishes that scene on ``sim/scene``); graphs of it (:meth:`TwinPerception.graphs`, `graphs_from_poses`) are the
``fiducial`` graph source's (`sgvla.so101.perception.source`). Success is still judged on the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sgvla.core.state import SceneState
from sgvla.paths import resolve_data_path
from sgvla.scene_graph import ViewGraph
from sgvla.so101.hardware.calibration import load_camera_calibration
from sgvla.so101.hardware.config import load_hardware_config
from sgvla.so101.perception.fiducials import load_marker_config
from sgvla.so101.perception.live import LivePerception, StreamImage
from sgvla.so101.perception.poses import ObjectPose
from sgvla.so101.twin.pick_place import PickPlaceParams
from sgvla.so101.twin.twin import So101Twin

TWIN_RIG = "twin"  # config/hardware/twin.yaml: which of the twin's cameras have depth, as the rig streams them


def depth_cameras() -> frozenset[str]:
    """The twin cameras (devices) that stream aligned depth on the twin rig."""
    return frozenset(c.device for c in load_hardware_config(TWIN_RIG).cameras if c.needs_twin and c.depth)


class TwinPerception:
    """Fiducial perception of one twin: :meth:`update` per control step with the rendered frames and the joints; the
    tracked poses, the perceived scene and its graphs in between."""

    def __init__(self, twin: So101Twin) -> None:
        config = twin.config
        if not config.markers:
            raise ValueError("perception needs the twin's fiducial markers, but its config draws none (markers: '')")
        files = config.calibration_files()
        self.live = LivePerception(load_marker_config(resolve_data_path(config.markers)),
                                   {name: load_camera_calibration(files[name]) for name in twin.cameras},
                                   PickPlaceParams().closed_below)
        self.width, self.height = config.image_width, config.image_height
        for name in twin.cameras:
            self.live.set_intrinsics(name, twin.intrinsics(name, self.width, self.height), np.zeros(5), self.width,
                                     self.height)
        self.depth = depth_cameras() & set(twin.cameras)
        self.poses: dict[str, ObjectPose] = {}
        self.joints: dict[str, float] = {}

    def update(self, time_s: float, images: Mapping[str, np.ndarray], depths: Mapping[str, np.ndarray],
               joints: Mapping[str, float]) -> None:
        """The poses after this instant's frames: ``images`` RGB per camera (upright), ``depths`` metres where the
        camera has depth, ``joints`` radians by URDF name."""
        self.joints = dict(joints)
        frames = {name: StreamImage(image, depths.get(name)) for name, image in images.items()}
        self.poses = self.live.update(time_s, frames, self.joints)

    def scene(self, task: str) -> SceneState:
        """The scene as perceived now (see `sgvla.so101.perception.live.perceived_scene`)."""
        return self.live.scene(self.poses, task, self.joints)

    def graphs(self, task: str) -> dict[str, ViewGraph]:
        """Per camera, the perceived objects' graph and boxes (upright image rows)."""
        return self.live.graphs(self.poses, task)

    def reset(self) -> None:
        self.live.reset()
        self.poses, self.joints = {}, {}
