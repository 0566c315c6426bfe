"""``So101Twin``: physics and rendering of the SO101 tabletop twin behind one small, thread-safe API.

One object serves the evaluation backend, the ROS node and the simulated Feetech bus alike: joints
in radians keyed by the URDF names, position targets clamped like the servos' ranges, time in
seconds, camera images upright, and the privileged scene state the scene-graph core reads. Every
public method holds ``lock`` (an RLock), since a ROS node steps physics in one thread while a bus
thread reads the joints.

Cameras draw the render model (:mod:`sgvla.sim.render_meshes`: the same scene with decimated meshes, made on
first use and cached; ``render_meshes: full`` in the config draws the package's meshes), while physics and every
geometric query use the full model. :meth:`So101Twin.render` draws under the lock (images of exactly the state
the caller stepped to); a :class:`TwinView` (:meth:`So101Twin.view`) has OpenGL contexts of its own and holds the
lock only to copy the scene, so a camera thread draws while physics goes on.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import mujoco
import numpy as np

from sgvla.so101.hardware.joints import JOINTS
from sgvla.so101.perception.live import upright_boxes
from sgvla.scene_graph import ViewGraph, ground_truth_batch
from sgvla.core.state import SceneState
from sgvla.sim.mujoco_state import (
    CameraRig, ObjectIndex, ObstacleIndex, box_half_size, camera_id, camera_intrinsics, camera_pose, free_joint, geom_batch, geom_poses, object_index, object_positions, obstacle_boxes, obstacle_index,
)
from sgvla.sim.render_meshes import render_model
from sgvla.so101.twin.config import TARGET, TaskLayout, TwinConfig
from sgvla.so101.twin.scene import (
    AGENTVIEW, ARM_ROOT, WRIST, build_spec, initial_positions, is_marker_geom, main_body, object_height,
)

GRIPPER_SITE = "gripperframe"
# Success: the bowl rests on the place object's top, inside its footprint by this margin, released.
ON_TOP_TOLERANCE = 0.015  # metres between the bowl's underside and the top face
FOOTPRINT_MARGIN = 0.01
AT_REST_SPEED = 0.05  # m/s


def without_markers(model: mujoco.MjModel, index: ObjectIndex) -> ObjectIndex:
    """The objects' geoms less their marker plates: the scene-graph geometry is that of the objects themselves."""
    keep = np.array([not is_marker_geom(model.geom(g).name) for g in index.geom_ids], dtype=bool)
    return ObjectIndex(index.names, index.body_ids, index.geom_ids[keep], index.geom_object[keep])


class So101Twin:
    """The SO101 arm and the objects of task ``task_id`` (or of ``layout``: the task as a perturbation left it);
    see the module docstring. Success is judged on the target bowl only."""

    def __init__(self, config: TwinConfig, task_id: int = 0, layout: TaskLayout | None = None) -> None:
        self.lock = threading.RLock()
        self.config = config
        self.task_id = task_id
        self.layout = config.task(task_id) if layout is None else layout
        self.task = self.layout.prompt
        self.model = build_spec(config, task_id, self.layout).compile()
        self.data = mujoco.MjData(self.model)
        self.control_period = 1.0 / config.control_rate_hz
        self.cameras = (AGENTVIEW, WRIST)
        model = self.model
        self._qpos = np.array([model.joint(j).qposadr[0] for j in JOINTS])
        self._dof = np.array([model.joint(j).dofadr[0] for j in JOINTS])
        self._actuator = {j: model.actuator(j).id for j in JOINTS}
        self.site_id = model.site(GRIPPER_SITE).id
        self.index = without_markers(model, object_index(model))
        self._half_sizes = np.array([box_half_size(model, g) for g in self.index.geom_ids])
        arm = model.body(ARM_ROOT).id
        self.arm_geoms = np.flatnonzero(model.body_rootid[model.geom_bodyid] == arm)
        obstacles = obstacle_index(model, self.index)
        keep = ~np.isin(obstacles.geom_ids, self.arm_geoms)
        self._obstacles = ObstacleIndex(obstacles.geom_ids[keep], obstacles.owner[keep], obstacles.half_sizes[keep])
        bowl = self.index.body_ids[self.index.column(TARGET)]
        self._bowl_joint = free_joint(model, bowl)
        self._bowl_geoms = np.flatnonzero(model.geom_bodyid == bowl)
        self._rig = CameraRig(model, self.cameras, config.image_width, config.image_height)
        self._render_model: mujoco.MjModel | None = None
        self._render_model_lock = threading.Lock()  # not ``lock``: making it must not stall physics
        self._view = TwinView(self)  # render()'s, used under ``lock``
        self._initial = initial_positions(config, self.layout)
        self.reset(0)

    # -- physics ---------------------------------------------------------------------------------

    def reset(self, seed: int) -> None:
        """Task layout with seeded position noise (a stacked object moves with its support), arm at rest, settled."""
        with self.lock:
            rng = np.random.default_rng(seed)
            model, data = self.model, self.data
            mujoco.mj_resetData(model, data)
            noise = {name: rng.uniform(-1, 1, 2) * self.config.position_noise for name in self.index.names}
            for name, support in self.layout.stands_on.items():
                noise[name] = noise[support]
            for name in self.index.names:
                joint = free_joint(model, self.index.body_ids[self.index.column(name)])
                data.qpos[joint.qpos] = [*(self._initial[name][:2] + noise[name]), self._initial[name][2], 1, 0, 0, 0]
            rest = {j: self.config.rest_pose.get(j, 0.0) for j in JOINTS}
            data.qpos[self._qpos] = [rest[j] for j in JOINTS]
            self.set_joint_targets(rest)
            mujoco.mj_forward(model, data)
            self.advance(self.config.settle_s)

    def joint_positions(self) -> dict[str, float]:
        with self.lock:
            return dict(zip(JOINTS, self.data.qpos[self._qpos].tolist()))

    def joint_velocities(self) -> dict[str, float]:
        with self.lock:
            return dict(zip(JOINTS, self.data.qvel[self._dof].tolist()))

    def joint_targets(self) -> dict[str, float]:
        with self.lock:
            return {j: float(self.data.ctrl[a]) for j, a in self._actuator.items()}

    def set_joint_targets(self, targets: Mapping[str, float]) -> None:
        """Position targets in radians for any subset of joints, clamped to the actuators' ranges."""
        unknown = sorted(set(targets) - set(JOINTS))
        if unknown:
            raise ValueError(f"unknown joint(s) {unknown}; joints are {list(JOINTS)}")
        values = {j: float(v) for j, v in targets.items()}
        bad = [j for j, v in values.items() if not np.isfinite(v)]
        if bad:
            raise ValueError(f"joint target(s) of {bad} are not finite: {targets}")
        with self.lock:
            for joint, value in values.items():
                actuator = self._actuator[joint]
                low, high = self.model.actuator_ctrlrange[actuator]
                self.data.ctrl[actuator] = min(max(value, low), high)

    def advance(self, seconds: float) -> None:
        """Run physics for ``seconds`` (rounded to whole physics steps), then update kinematics and cameras."""
        if not np.isfinite(seconds) or seconds < 0:
            raise ValueError(f"advance needs a finite, non-negative duration, got {seconds}")
        with self.lock:
            steps = int(round(seconds / self.model.opt.timestep))
            if steps:
                mujoco.mj_step(self.model, self.data, nstep=steps)
            mujoco.mj_forward(self.model, self.data)

    # -- cameras ---------------------------------------------------------------------------------

    def _size(self, width: int | None, height: int | None) -> tuple[int, int]:
        width = self.config.image_width if width is None else int(width)
        height = self.config.image_height if height is None else int(height)
        limit = (self.model.vis.global_.offwidth, self.model.vis.global_.offheight)
        if not (0 < width <= limit[0] and 0 < height <= limit[1]):
            raise ValueError(f"image size {width}x{height} outside 1..{limit[0]}x1..{limit[1]} "
                             "(raise image_width/image_height in the twin config for larger images)")
        return width, height

    @property
    def render_model(self) -> mujoco.MjModel:
        """What cameras draw (see the module docstring); made on first use, seconds when its meshes are cached."""
        with self._render_model_lock:
            if self._render_model is None:
                self._render_model = (self.model if self.config.render_meshes == "full"
                                      else render_model(build_spec(self.config, self.task_id, self.layout),
                                                                    self.model))
            return self._render_model

    def view(self) -> TwinView:
        """Cameras with OpenGL contexts of their own, for one other thread (see :class:`TwinView`)."""
        return TwinView(self)

    def render(self, camera: str, width: int | None = None, height: int | None = None) -> np.ndarray:
        """(H, W, 3) uint8, row 0 at the top."""
        with self.lock:
            return self._view.render(camera, width, height)

    def render_depth(self, camera: str, width: int | None = None, height: int | None = None) -> np.ndarray:
        """(H, W) float32 depth in metres along the optical axis, row 0 at the top."""
        with self.lock:
            return self._view.render_depth(camera, width, height)

    def intrinsics(self, camera: str, width: int, height: int) -> np.ndarray:
        """3x3 pinhole K of ``camera`` for images of ``width`` x ``height``."""
        return camera_intrinsics(self.model, camera, *self._size(width, height))

    def camera_pose(self, camera: str) -> np.ndarray:
        """4x4 world-from-optical-frame transform (OpenCV axes: x right, y down, z forward)."""
        with self.lock:
            return camera_pose(self.data, camera_id(self.model, camera))

    # -- privileged state ------------------------------------------------------------------------

    def scene(self) -> SceneState:
        with self.lock:
            model, data = self.model, self.data
            centers, rotations = geom_poses(data, self.index)
            gripper = self._qpos[JOINTS.index("gripper")]
            return SceneState(
                objects=self.index.names,
                positions=object_positions(data, self.index),
                geoms=geom_batch(model, self.index, centers[None], rotations[None], self._half_sizes),
                cameras=self._rig.cameras(data),
                eef_pos=np.array(data.site_xpos[self.site_id]),
                eef_mat=np.array(data.site_xmat[self.site_id]).reshape(3, 3),
                gripper_qpos=np.array([data.qpos[gripper]]),
                task=self.task,
                obstacles=obstacle_boxes(data, self._obstacles),
            )

    def ground_truth(self, views: Sequence[str] | None = None, scene: SceneState | None = None) -> dict[str, ViewGraph]:
        """Graph and boxes per camera (default: all) with the so101_tabletop objects; boxes in upright images."""
        scene = scene or self.scene()
        views = tuple(self.cameras if views is None else views)
        unknown = [v for v in views if v not in scene.cameras]
        if unknown:
            raise ValueError(f"unknown view(s) {unknown}; the twin's cameras are {list(scene.cameras)}")
        cameras = {v: scene.cameras[v] for v in views}
        batch = ground_truth_batch(scene.objects, scene.geoms, scene.positions[None], cameras, scene.task)
        return {v: upright_boxes(graphs.frame(0), cameras[v].height) for v, graphs in batch.items()}

    def _bowl_touches_arm(self) -> bool:
        geoms = self.data.contact.geom[: self.data.ncon].T  # (2, ncon)
        on_bowl, on_arm = np.isin(geoms, self._bowl_geoms), np.isin(geoms, self.arm_geoms)
        return bool((on_bowl[0] & on_arm[1] | on_bowl[1] & on_arm[0]).any())

    def success(self) -> bool:
        """The target bowl rests on top of the task's place object, within its footprint, and the gripper let go
        (where the other bowl ends up does not matter)."""
        with self.lock:
            model, data = self.model, self.data
            place = self.layout.place
            bowl_body = model.body(main_body(TARGET)).id
            place_body = model.body(main_body(place)).id
            rotation = data.xmat[place_body].reshape(3, 3)
            offset = rotation.T @ (data.xpos[bowl_body] - data.xpos[place_body])
            half = self.config.shapes[place].half_size
            inside = all(abs(offset[i]) <= half[i] - FOOTPRINT_MARGIN for i in range(2))
            on_top = abs(offset[2] - object_height(self.config, place)) <= ON_TOP_TOLERANCE
            speed = np.linalg.norm(data.qvel[self._bowl_joint.qvel][:3])
            return bool(inside and on_top and speed < AT_REST_SPEED and not self._bowl_touches_arm())

    def close(self) -> None:
        with self.lock:
            self._view.close()


class TwinView:
    """The twin's cameras drawn by OpenGL contexts of one thread: the scene is copied under the twin's lock
    (``update_scene``), then drawn after releasing it, while physics goes on. Use it from one thread only (its
    contexts are made current there); each camera thread has a view of its own, so a slow camera never waits on
    another one."""

    def __init__(self, twin: So101Twin):
        self.twin, self.cameras = twin, twin.cameras
        self._renderers: dict[tuple[int, int, bool], mujoco.Renderer] = {}

    def _renderer(self, camera: str, width: int | None, height: int | None, depth: bool) -> mujoco.Renderer:
        twin = self.twin
        camera_id(twin.model, camera)  # a clear error for an unknown camera
        size = twin._size(width, height)
        renderer = self._renderers.get((*size, depth))
        if renderer is None:
            renderer = mujoco.Renderer(twin.render_model, height=size[1], width=size[0])
            if depth:
                renderer.enable_depth_rendering()
            self._renderers[(*size, depth)] = renderer
        return renderer

    def _draw(self, camera: str, width: int | None, height: int | None, kinds: Sequence[bool]) -> list[np.ndarray]:
        """Images of one physics state: every renderer's scene is copied under one hold of the lock (physics may
        step between two holds, and a color image and its depth must show the same instant)."""
        renderers = [self._renderer(camera, width, height, depth) for depth in kinds]
        with self.twin.lock:
            for renderer in renderers:
                renderer.update_scene(self.twin.data, camera=camera)
        return [renderer.render() for renderer in renderers]

    def render(self, camera: str, width: int | None = None, height: int | None = None) -> np.ndarray:
        """(H, W, 3) uint8, row 0 at the top."""
        return self._draw(camera, width, height, (False,))[0]

    def render_depth(self, camera: str, width: int | None = None, height: int | None = None) -> np.ndarray:
        """(H, W) float32 depth in metres along the optical axis, row 0 at the top."""
        return self._draw(camera, width, height, (True,))[0].astype(np.float32)

    def render_rgbd(self, camera: str, width: int | None = None,
                    height: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`render` and :meth:`render_depth` of the same instant (a depth camera's aligned pair)."""
        color, depth = self._draw(camera, width, height, (False, True))
        return color, depth.astype(np.float32)

    def intrinsics(self, camera: str, width: int, height: int) -> np.ndarray:
        return self.twin.intrinsics(camera, width, height)

    def close(self) -> None:
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()
