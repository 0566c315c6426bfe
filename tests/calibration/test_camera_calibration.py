"""`sgvla calibrate camera` on ChArUco images rendered from the SO101 twin, where the true intrinsics and camera pose are known.

The board (OpenCV's own generated image, as a texture on a thin plate) is added to the twin's scene,
cleared of its objects as a real table would be for calibration, and rendered by the twin's
agent-view camera: at 16 poses in front of the camera for the intrinsics, then lying flat on the
table at a known pose in the arm's base frame for the extrinsics.
"""

import cv2
import mujoco
import numpy as np
import pytest

from sgvla.cli import main
from sgvla.so101.hardware.calibration import CalibrationError, load_camera_calibration
from sgvla.so101.hardware.camera_calibration import BoardSpec, Pose, calibrate_intrinsics, load_images
from sgvla.sim.mujoco_state import camera_id, camera_pose
from sgvla.so101.twin.config import load_twin_config
from sgvla.so101.twin.scene import AGENTVIEW, ARM_ROOT, build_spec, main_body

pytestmark = pytest.mark.sim

BOARD = BoardSpec(7, 5, 0.04, 0.03)
MARGIN_M = 0.02  # white border around the squares, as on a printed board
PX_PER_M = 3500  # texture resolution: 140 px squares, 15 px marker cells
WIDTH, HEIGHT = 640, 480
PLATE_HALF = np.array([BOARD.squares_x * BOARD.square_m / 2 + MARGIN_M,
                       BOARD.squares_y * BOARD.square_m / 2 + MARGIN_M, 0.002])
# The board frame on the plate: the texture's top-left square corner on the +z face, seen from above
# with the image's top along +y, so x along +x, y along -y and z (into the board) along -z.
PLATE_FROM_BOARD = np.eye(4)
PLATE_FROM_BOARD[:3, :3] = np.diag([1.0, -1.0, -1.0])
PLATE_FROM_BOARD[:3, 3] = [-PLATE_HALF[0] + MARGIN_M, PLATE_HALF[1] - MARGIN_M, PLATE_HALF[2]]
# The board lying face up on the table in front of the arm, its first row running towards the arm (x along -x).
BOARD_ON_TABLE = Pose((0.28, -0.1, 2 * PLATE_HALF[2]), (0.0, 1.0, 0.0, 0.0))
INTRINSIC_TOLERANCE = 0.005  # relative, fx fy cx cy
DISTORTION_TOLERANCE_PX = 1.0
EXTRINSIC_TOLERANCE_MM, EXTRINSIC_TOLERANCE_DEG = 3.0, 0.3


def transform(rotation: np.ndarray, translation) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3], t[:3, 3] = rotation, translation
    return t


def euler(x_deg: float, y_deg: float, z_deg: float) -> np.ndarray:
    return cv2.Rodrigues(np.radians([x_deg, 0, 0]))[0] @ cv2.Rodrigues(np.radians([0, y_deg, 0]))[0] @ \
        cv2.Rodrigues(np.radians([0, 0, z_deg]))[0]


def quat(rotation: np.ndarray) -> np.ndarray:
    q = np.empty(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(rotation).ravel())
    return q


def build_scene() -> tuple[mujoco.MjModel, mujoco.MjData]:
    """The twin's scene without its objects, the arm at rest, and the board on a mocap plate."""
    config = load_twin_config()
    spec = build_spec(config, 0)
    for name in config.task(0).objects:
        spec.delete(spec.body(main_body(name)))
    image = BOARD.board().generateImage((round(2 * PLATE_HALF[0] * PX_PER_M), round(2 * PLATE_HALF[1] * PX_PER_M)),
                                        marginSize=round(MARGIN_M * PX_PER_M))
    texture = spec.add_texture(name="charuco", type=mujoco.mjtTexture.mjTEXTURE_2D, width=image.shape[1],
                               height=image.shape[0], nchannel=3)
    texture.data = np.repeat(image[:, :, None], 3, axis=2).tobytes()
    material = spec.add_material(name="charuco", specular=0.0, shininess=0.0)
    material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "charuco"
    plate = spec.worldbody.add_body(name="charuco", mocap=True)
    plate.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=PLATE_HALF.tolist(), material="charuco")
    model = spec.compile()
    data = mujoco.MjData(model)
    for joint, value in config.rest_pose.items():
        data.qpos[model.joint(joint).qposadr[0]] = value
    mujoco.mj_forward(model, data)
    return model, data


def true_intrinsics(model: mujoco.MjModel) -> np.ndarray:
    """fx, fy, cx, cy of MuJoCo's pinhole with OpenCV's pixel convention (pixel i's centre at i): the
    principal point is at (W - 1) / 2, half a pixel from sgvla.core.state.camera_intrinsics' W / 2."""
    f = HEIGHT / 2 / np.tan(np.radians(model.camera(AGENTVIEW).fovy[0]) / 2)
    return np.array([f, f, (WIDTH - 1) / 2, (HEIGHT - 1) / 2])


def render_board(model, data, renderer, world_from_board: np.ndarray) -> np.ndarray:
    world_from_plate = world_from_board @ np.linalg.inv(PLATE_FROM_BOARD)
    data.mocap_pos[0], data.mocap_quat[0] = world_from_plate[:3, 3], quat(world_from_plate[:3, :3])
    mujoco.mj_forward(model, data)
    renderer.update_scene(data, AGENTVIEW)
    return cv2.cvtColor(renderer.render(), cv2.COLOR_RGB2BGR)


def views() -> list[np.ndarray]:
    """Board poses in the optical frame: 0.4-0.6 m away, tilted up to 35 deg, four of them in the image corners,
    all above the table (the arm hides a corner or two of some)."""
    centre = np.array([BOARD.squares_x, BOARD.squares_y, 0]) * BOARD.square_m / 2
    poses = []
    for tilt_x, tilt_y, roll, dx, dy, depth in [
            (0, 0, 0, 0, 0, 0.5), (30, 0, 0, 0, 0, 0.5), (-30, 0, 5, 0, 0, 0.5), (0, 30, 0, 0, 0, 0.5),
            (0, -30, -5, 0, 0, 0.5), (20, 20, 10, 0.08, 0.05, 0.55), (-20, 25, -10, -0.08, 0.05, 0.6),
            (25, -20, 90, 0.06, -0.04, 0.55), (-25, -25, 180, -0.06, -0.05, 0.6), (35, 10, 15, 0.0, 0.06, 0.45),
            (10, -35, -15, 0.05, 0.0, 0.45), (-15, 15, 45, 0.0, 0.0, 0.4), (30, 30, 10, 0.13, 0.09, 0.45),
            (-30, 30, -10, -0.13, 0.09, 0.45), (30, -30, 0, 0.15, -0.12, 0.6), (-30, -30, 0, -0.15, -0.12, 0.6)]:
        rotation = euler(tilt_x, tilt_y, roll)
        poses.append(transform(rotation, np.array([dx, dy, depth]) - rotation @ centre))
    return poses


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The 16 intrinsic views and the extrinsic view as PNG files; the camera's true pose (base frame) and intrinsics."""
    folder = tmp_path_factory.mktemp("charuco")
    (folder / "views").mkdir()
    model, data = build_scene()
    world_from_base = transform(data.body(ARM_ROOT).xmat.reshape(3, 3), data.body(ARM_ROOT).xpos)
    world_from_optical = camera_pose(data, camera_id(model, AGENTVIEW))
    with mujoco.Renderer(model, HEIGHT, WIDTH) as renderer:
        for i, optical_from_board in enumerate(views()):
            image = render_board(model, data, renderer, world_from_optical @ optical_from_board)
            cv2.imwrite(str(folder / "views" / f"view{i:02d}.png"), image)
        image = render_board(model, data, renderer, world_from_base @ BOARD_ON_TABLE.matrix())
        cv2.imwrite(str(folder / "table.png"), image)
    return folder, np.linalg.inv(world_from_base) @ world_from_optical, true_intrinsics(model)


def test_calibrate_camera_recovers_intrinsics_and_pose_in_the_base_frame(rendered, tmp_path, capsys):
    folder, base_from_optical, intrinsics = rendered
    pose = ",".join(str(v) for v in (*BOARD_ON_TABLE.translation, *BOARD_ON_TABLE.rotation_xyzw))
    assert main(["calibrate", "camera", "--images", str(folder / "views"), "--board", "7,5,0.04,0.03",
                 "--name", AGENTVIEW, "--extrinsic-image", str(folder / "table.png"), "--board-pose", pose,
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "view09.png: 24 corners, reprojection error" in out and "16 images, RMS reprojection error" in out

    result = load_camera_calibration(str(tmp_path / f"{AGENTVIEW}.yaml"))
    assert (result.width, result.height, result.parent_frame) == (WIDTH, HEIGHT, "base_link")
    k = np.array(result.k).reshape(3, 3)
    found = np.array([k[0, 0], k[1, 1], k[0, 2], k[1, 2]])
    error = np.abs(found - intrinsics) / intrinsics
    assert error.max() < INTRINSIC_TOLERANCE, (found, intrinsics)
    # MuJoCo's pinhole has no distortion: the fitted model must move no pixel of the image noticeably.
    grid = np.stack(np.meshgrid(np.arange(0, WIDTH, 8), np.arange(0, HEIGHT, 8)), -1).reshape(-1, 1, 2)
    rays = cv2.convertPointsToHomogeneous(cv2.undistortPoints(grid.astype(np.float64), k, None)).reshape(-1, 3)
    shift = np.linalg.norm(cv2.projectPoints(rays, np.zeros(3), np.zeros(3), k, np.array(result.d))[0].reshape(-1, 2)
                           - grid.reshape(-1, 2), axis=1).max()
    assert shift < DISTORTION_TOLERANCE_PX, (shift, result.d)

    estimate = Pose(result.translation, result.rotation_xyzw).matrix()
    offset_mm = 1000 * np.linalg.norm(estimate[:3, 3] - base_from_optical[:3, 3])
    cos = (np.trace(estimate[:3, :3].T @ base_from_optical[:3, :3]) - 1) / 2
    angle_deg = np.degrees(np.arccos(np.clip(cos, -1, 1)))
    assert offset_mm < EXTRINSIC_TOLERANCE_MM and angle_deg < EXTRINSIC_TOLERANCE_DEG, (offset_mm, angle_deg)
    print(f"intrinsics error {100 * error.max():.3f} %, distortion {shift:.3f} px, "
          f"camera pose error {offset_mm:.2f} mm {angle_deg:.3f} deg")


def test_views_without_the_board_are_skipped_and_too_few_are_an_error(rendered):
    folder, _, _ = rendered
    images = load_images(str(folder / "views" / "view0[0-3].png"))
    blank = np.full_like(images["view00.png"], 255)
    result = calibrate_intrinsics({**images, "blank.png": blank}, BOARD)
    assert set(result.per_image) == set(images) and "blank.png" in result.skipped
    with pytest.raises(CalibrationError, match="board was found in 2 of 3 images; need at least 3"):
        calibrate_intrinsics({"a": images["view00.png"], "b": images["view01.png"], "blank.png": blank}, BOARD)
    with pytest.raises(CalibrationError, match="board was found in 0 of 4 images"):
        calibrate_intrinsics(images, BoardSpec(7, 5, 0.04, 0.03, "DICT_4X4_50"))  # another board's markers


def test_bad_input_is_a_clear_error(rendered, tmp_path, capsys):
    folder, _, _ = rendered
    for text, message in [("7,5,0.04", "expected squares_x,squares_y,square_m,marker_m"),
                          ("7,5,0.03,0.04", "must be positive and smaller than the square side"),
                          ("seven,5,0.04,0.03", "squares must be integers"),
                          ("7,5,0.04,0.03,DICT_9X9_1", "unknown ArUco dictionary 'DICT_9X9_1'"),
                          ("2,2,0.04,0.03", "too few inner corners"),
                          ("20,20,0.04,0.03,DICT_4X4_50", "needs 200 markers, DICT_4X4_50 has 50")]:
        with pytest.raises(CalibrationError, match=message):
            BoardSpec.parse(text)
    with pytest.raises(CalibrationError, match="expected x,y,z,qx,qy,qz,qw"):
        Pose.parse("0,0,0,0,0,0,0")
    with pytest.raises(CalibrationError, match="no images in or matching"):
        load_images(str(tmp_path / "*.png"))
    assert main(["calibrate", "camera", "--images", str(tmp_path), "--board", "7,5,0.04,0.03", "--name", "x",
                 "--out", str(tmp_path)]) == 1
    assert "error: no images in or matching" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["calibrate", "camera", "--images", str(folder / "views"), "--board", "7,5,0.04,0.03", "--name", "x",
              "--extrinsic-image", str(folder / "table.png")])
    assert "--extrinsic-image and --board-pose go together" in capsys.readouterr().err
