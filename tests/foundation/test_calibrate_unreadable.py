"""`sgvla calibrate camera` with one file among the views that OpenCV cannot read (damaged, truncated, not an
image): a warning naming it, the calibration goes on from the readable views (as with views where the board is not
found); with too few readable views left, an error naming every skipped file. Never a traceback.

The views are OpenCV's own ChArUco board image seen by a known pinhole camera from several poses (a homography per
pose), so the calibration has a true answer to recover."""

import cv2
import numpy as np
import pytest

from sgvla.cli import main
from sgvla.so101.hardware.calibration import load_camera_calibration
from sgvla.so101.hardware.camera_calibration import BoardSpec

BOARD = BoardSpec(7, 5, 0.04, 0.03)
SQUARE_PX, MARGIN_PX = 60, 30  # the board image: 60 px per square, a white margin
K = np.array([[500.0, 0, 320], [0, 500.0, 240], [0, 0, 1]])
SIZE = (640, 480)
POSES = [(0, 0), (20, 0), (-20, 0), (0, 20), (0, -20), (15, 15)]  # tilt about x and y, degrees


def view(board: np.ndarray, tilt_x: float, tilt_y: float) -> np.ndarray:
    """The board as the camera K sees it, tilted by (tilt_x, tilt_y) degrees, its centre 0.45 m ahead."""
    half = np.array([BOARD.squares_x, BOARD.squares_y, 0]) * BOARD.square_m / 2
    rotation = cv2.Rodrigues(np.radians([tilt_x, 0, 0]))[0] @ cv2.Rodrigues(np.radians([0, tilt_y, 0]))[0]
    translation = np.array([0, 0, 0.45]) - rotation @ half
    metres_from_px = np.array([[BOARD.square_m / SQUARE_PX, 0, -MARGIN_PX * BOARD.square_m / SQUARE_PX],
                               [0, BOARD.square_m / SQUARE_PX, -MARGIN_PX * BOARD.square_m / SQUARE_PX], [0, 0, 1]])
    homography = K @ np.column_stack([rotation[:, 0], rotation[:, 1], translation]) @ metres_from_px
    gray = cv2.warpPerspective(board, homography, SIZE, flags=cv2.INTER_AREA, borderValue=160)
    return cv2.cvtColor(gray, cv2.COLOR_GRAY2BGR)


@pytest.fixture
def views(tmp_path):
    board = BOARD.board().generateImage((BOARD.squares_x * SQUARE_PX + 2 * MARGIN_PX,
                                         BOARD.squares_y * SQUARE_PX + 2 * MARGIN_PX), marginSize=MARGIN_PX)
    folder = tmp_path / "shots"
    folder.mkdir()
    for i, pose in enumerate(POSES):
        cv2.imwrite(str(folder / f"view{i}.png"), view(board, *pose))
    good = (folder / "view0.png").read_bytes()
    (folder / "view3.png").write_bytes(good[: len(good) // 3])  # truncated, as a copy cut short
    return folder


def calibrate(images: str, out) -> int:
    return main(["calibrate", "camera", "--images", images, "--board", "7,5,0.04,0.03", "--name", "cam",
                 "--out", str(out)])


def test_an_unreadable_view_is_skipped_by_name_and_the_rest_calibrate(views, tmp_path, capsys):
    assert calibrate(str(views), tmp_path) == 0
    out, err = capsys.readouterr()
    assert "warning: view3.png: skipped, not a readable image" in err, err
    assert "5 images, RMS reprojection error" in out, out
    fx = load_camera_calibration(str(tmp_path / "cam.yaml")).k[0]
    assert fx == pytest.approx(500.0, rel=0.02)  # the true focal length, from the five readable views


def test_too_few_readable_views_is_an_error_naming_the_unreadable_one(views, tmp_path, capsys):
    assert calibrate(str(views / "view[23].png"), tmp_path) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the board was found in 1 of 2 images") and "'view3.png': 'not a readable image" in err
    assert "Traceback" not in err and not (tmp_path / "cam.yaml").exists()
