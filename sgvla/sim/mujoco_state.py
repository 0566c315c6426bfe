"""What the scene-graph core needs from MuJoCo: pure functions of a raw ``mujoco.MjModel`` / ``MjData``.

Conventions, as in the EmbodimentSemantic reference:

- objects are the bodies named ``<object>_main`` that are not part of the robot
  or gripper; an object's geoms are every geom of its body subtree (the cabinet's
  drawers included), visual and collision alike; its position is the ``_main``
  body's world position;
- cameras follow robosuite's ``camera_utils``: intrinsics from ``fovy`` with square
  pixels and the principal point at the image center, extrinsics as the camera
  pose in the world with OpenCV axes (z forward, y down);
- images and boxes: MuJoCo renders OpenGL-style, so LIBERO stores images with
  rows bottom-up, and the boxes of :mod:`sgvla.scene_graph.projection` use that
  stored convention (see :func:`sgvla.core.state.box_to_policy_frame`).

The types these functions fill (SceneState, Boxes) are the core's (:mod:`sgvla.core.state`): the same for
simulated and real embodiments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from sgvla.core.state import Boxes
from sgvla.scene_graph import Camera, GeomBatch

OBJECT_SUFFIX = "_main"
EXCLUDED_PREFIXES = ("robot", "gripper")
# MuJoCo camera frame (x right, y up, looking down -z) to OpenCV (x right, y down, z forward).
_GL_TO_CV = np.diag([1.0, -1.0, -1.0, 1.0])


@dataclass(frozen=True, eq=False)
class ObjectIndex:
    """Static per model: object names, their ``_main`` bodies, and their geoms (flat, with owners)."""

    names: tuple[str, ...]
    body_ids: np.ndarray
    geom_ids: np.ndarray
    geom_object: np.ndarray

    def column(self, name: str) -> int:
        return self.names.index(name)


def _name(model: mujoco.MjModel, kind: mujoco.mjtObj, i: int) -> str:
    return mujoco.mj_id2name(model, kind, i) or ""


def object_index(model: mujoco.MjModel) -> ObjectIndex:
    names, bodies = [], []
    for b in range(model.nbody):
        body = _name(model, mujoco.mjtObj.mjOBJ_BODY, b)
        if body.endswith(OBJECT_SUFFIX) and not body.startswith(EXCLUDED_PREFIXES):
            names.append(body[: -len(OBJECT_SUFFIX)])
            bodies.append(b)
    # Owner of every body: the nearest ancestor that is an object's _main body.
    owner = np.full(model.nbody, -1)
    owner[bodies] = np.arange(len(bodies))
    for b in range(1, model.nbody):  # parents precede children in MuJoCo's body order
        if owner[b] < 0:
            owner[b] = owner[model.body_parentid[b]]
    geom_owner = owner[model.geom_bodyid]
    geom_ids = np.flatnonzero(geom_owner >= 0)
    return ObjectIndex(tuple(names), np.asarray(bodies, dtype=np.intp), geom_ids, geom_owner[geom_ids])


def object_positions(data: mujoco.MjData, index: ObjectIndex) -> np.ndarray:
    """(N, 3) world positions of the ``_main`` bodies."""
    return np.array(data.xpos[index.body_ids], dtype=np.float64)


def geom_poses(data: mujoco.MjData, index: ObjectIndex) -> tuple[np.ndarray, np.ndarray]:
    """World centers (G, 3) and rotations (G, 3, 3) of the objects' geoms."""
    return (np.array(data.geom_xpos[index.geom_ids], dtype=np.float64),
            np.array(data.geom_xmat[index.geom_ids], dtype=np.float64).reshape(-1, 3, 3))


def geom_batch(model: mujoco.MjModel, index: ObjectIndex, centers: np.ndarray, rotations: np.ndarray,
               half_sizes: np.ndarray | None = None) -> GeomBatch:
    """Geoms over F frames; ``centers`` (F, G, 3), ``rotations`` (F, G, 3, 3). ``half_sizes`` (G, 3)
    default to ``geom_size``, as the LIBERO reference does."""
    return GeomBatch(
        geom_object=index.geom_object,
        centers=centers,
        rotations=rotations,
        half_sizes=np.array(model.geom_size[index.geom_ids] if half_sizes is None else half_sizes, dtype=np.float64),
        n_objects=len(index.names),
    )


ROBOT_PREFIXES = ("robot", "gripper", "mount")



@dataclass(frozen=True, eq=False)
class ObstacleIndex:
    """Static per model: the colliding geoms of everything but the robot, and their box half-extents."""

    geom_ids: np.ndarray
    owner: np.ndarray
    half_sizes: np.ndarray


def box_half_size(model: mujoco.MjModel, g: int) -> np.ndarray:
    """Half-extents (3,) of the box bounding geom ``g`` in its frame (``geom_size`` is not one for round geoms)."""
    kind, size = model.geom_type[g], model.geom_size[g]
    if kind == mujoco.mjtGeom.mjGEOM_SPHERE:
        return np.full(3, size[0])
    if kind in (mujoco.mjtGeom.mjGEOM_CYLINDER, mujoco.mjtGeom.mjGEOM_CAPSULE):
        return np.array([size[0], size[0], size[1] + (size[0] if kind == mujoco.mjtGeom.mjGEOM_CAPSULE else 0.0)])
    return np.array(size)


def obstacle_index(model: mujoco.MjModel, index: ObjectIndex) -> ObstacleIndex:
    owner_of = dict(zip(index.geom_ids.tolist(), index.geom_object.tolist()))
    ids, owners, halves = [], [], []
    for g in range(model.ngeom):
        body = _name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.geom_bodyid[g]))
        kind = model.geom_type[g]
        if not (model.geom_contype[g] or model.geom_conaffinity[g]) or body.startswith(ROBOT_PREFIXES) \
                or kind == mujoco.mjtGeom.mjGEOM_PLANE:
            continue
        ids.append(g)
        owners.append(owner_of.get(g, -1))
        halves.append(box_half_size(model, g))
    return ObstacleIndex(np.asarray(ids, dtype=np.intp), np.asarray(owners, dtype=np.intp), np.asarray(halves).reshape(-1, 3))


def obstacle_boxes(data: mujoco.MjData, index: ObstacleIndex) -> Boxes:
    return Boxes(index.owner, np.array(data.geom_xpos[index.geom_ids]),
                 np.array(data.geom_xmat[index.geom_ids]).reshape(-1, 3, 3), index.half_sizes)



def camera_id(model: mujoco.MjModel, name: str) -> int:
    cam = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
    if cam < 0:
        known = [_name(model, mujoco.mjtObj.mjOBJ_CAMERA, i) for i in range(model.ncam)]
        raise ValueError(f"unknown camera {name!r}; this scene has {known}")
    return cam


def camera_intrinsics(model: mujoco.MjModel, name: str, width: int, height: int) -> np.ndarray:
    f = 0.5 * height / np.tan(model.cam_fovy[camera_id(model, name)] * np.pi / 360)
    return np.array([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]])


def camera_pose(data: mujoco.MjData, cam: int) -> np.ndarray:
    """Camera-to-world (4, 4), OpenCV axes."""
    pose = np.eye(4)
    pose[:3, :3] = np.asarray(data.cam_xmat[cam]).reshape(3, 3)
    pose[:3, 3] = data.cam_xpos[cam]
    return pose @ _GL_TO_CV


def is_fixed_camera(model: mujoco.MjModel, cam: int) -> bool:
    """Attached to the world body and not tracking anything: its pose never changes."""
    return model.cam_bodyid[cam] == 0 and model.cam_mode[cam] == mujoco.mjtCamLight.mjCAMLIGHT_FIXED


class CameraRig:
    """Pinhole cameras of one model at one image size; fixed cameras are computed once, moving ones per call."""

    def __init__(self, model: mujoco.MjModel, names: Sequence[str], width: int, height: int) -> None:
        self.names = tuple(names)
        self.width, self.height = int(width), int(height)
        self._ids = {n: camera_id(model, n) for n in self.names}
        self._K = {n: camera_intrinsics(model, n, width, height) for n in self.names}
        self._fixed = {n: is_fixed_camera(model, i) for n, i in self._ids.items()}
        self._cache: dict[str, Camera] = {}

    def cameras(self, data: mujoco.MjData) -> dict[str, Camera]:
        result = {}
        for name in self.names:
            camera = self._cache.get(name)
            if camera is None:
                camera = Camera(name, self._K[name], camera_pose(data, self._ids[name]), self.width, self.height)
                if self._fixed[name]:
                    self._cache[name] = camera
            result[name] = camera
        return result

    def poses(self, data: mujoco.MjData) -> dict[str, np.ndarray]:
        return {name: camera_pose(data, i) for name, i in self._ids.items()}

    def intrinsics(self, name: str) -> np.ndarray:
        return self._K[name]



@dataclass(frozen=True)
class JointSlice:
    qpos: slice
    qvel: slice


@dataclass(frozen=True)
class StateLayout:
    """Where each named joint sits in a flattened ``[time, qpos, qvel]`` MuJoCo state."""

    joints: dict[str, JointSlice]
    nq: int
    nv: int


def state_layout(model: mujoco.MjModel) -> StateLayout:
    joints = {}
    nq = np.diff(np.r_[model.jnt_qposadr, model.nq])
    nv = np.diff(np.r_[model.jnt_dofadr, model.nv])
    for j in range(model.njnt):
        name = _name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
        if not name or name in joints:
            raise ValueError(f"joint {j} has no unique name ({name!r}); states cannot be matched by joint name")
        qa, va = int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])
        joints[name] = JointSlice(slice(qa, qa + int(nq[j])), slice(va, va + int(nv[j])))
    return StateLayout(joints, int(model.nq), int(model.nv))


def free_joint(model: mujoco.MjModel, body: int) -> JointSlice | None:
    """The free joint that moves ``body`` (an object's ``_main`` body), if it has one."""
    for j in range(model.body_jntadr[body], model.body_jntadr[body] + model.body_jntnum[body]):
        if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            qa, va = int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])
            return JointSlice(slice(qa, qa + 7), slice(va, va + 6))
    return None


def project_state(state: np.ndarray, source: StateLayout, target: StateLayout) -> np.ndarray:
    """A flattened state of one model as a state of another, joint by joint.

    Joints only in ``source`` are dropped (removed objects); joints only in ``target`` stay zero.
    """
    state = np.asarray(state, dtype=np.float64)
    if state.shape != (1 + source.nq + source.nv,):
        raise ValueError(f"state has shape {state.shape}, expected ({1 + source.nq + source.nv},)")
    out = np.zeros(1 + target.nq + target.nv)
    out[0] = state[0]
    src_q, src_v, dst_q, dst_v = state[1:1 + source.nq], state[1 + source.nq:], out[1:1 + target.nq], out[1 + target.nq:]
    for name, dst in target.joints.items():
        src = source.joints.get(name)
        if src is not None:
            dst_q[dst.qpos] = src_q[src.qpos]
            dst_v[dst.qvel] = src_v[src.qvel]
    return out
