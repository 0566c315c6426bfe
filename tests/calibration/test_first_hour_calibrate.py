"""`sgvla calibrate camera` writes into the current folder by default, never into sgvla's own calibration/ (whose
agentview.yaml the twin and the rigs read), and never replaces an existing file without --force: one line says so,
before any work is done.

The views are OpenCV's ChArUco board seen by a known pinhole camera from a few poses (a homography per pose)."""

import hashlib

import cv2
import numpy as np
import pytest

from sgvla.cli import main
from sgvla.paths import CALIBRATION_DIR
from sgvla.so101.hardware.calibration import load_camera_calibration
from sgvla.so101.hardware.camera_calibration import BoardSpec

BOARD = BoardSpec(7, 5, 0.04, 0.03)
SQUARE_PX, MARGIN_PX = 60, 30
K = np.array([[500.0, 0, 320], [0, 500.0, 240], [0, 0, 1]])
SIZE = (640, 480)
POSES = [(0, 0), (20, 0), (-20, 0), (0, 20), (0, -20)]  # tilt about x and y, degrees


def view(board: np.ndarray, tilt_x: float, tilt_y: float) -> np.ndarray:
    half = np.array([BOARD.squares_x, BOARD.squares_y, 0]) * BOARD.square_m / 2
    rotation = cv2.Rodrigues(np.radians([tilt_x, 0, 0]))[0] @ cv2.Rodrigues(np.radians([0, tilt_y, 0]))[0]
    translation = np.array([0, 0, 0.45]) - rotation @ half
    scale = BOARD.square_m / SQUARE_PX
    metres_from_px = np.array([[scale, 0, -MARGIN_PX * scale], [0, scale, -MARGIN_PX * scale], [0, 0, 1]])
    homography = K @ np.column_stack([rotation[:, 0], rotation[:, 1], translation]) @ metres_from_px
    gray = cv2.warpPerspective(board, homography, SIZE, flags=cv2.INTER_AREA, borderValue=160)
    return cv2.cvtColor(gray, cv2.COLOR_GRAY2BGR)


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    board = BOARD.board().generateImage((BOARD.squares_x * SQUARE_PX + 2 * MARGIN_PX,
                                         BOARD.squares_y * SQUARE_PX + 2 * MARGIN_PX), marginSize=MARGIN_PX)
    folder = tmp_path_factory.mktemp("shots")
    for i, pose in enumerate(POSES):
        cv2.imwrite(str(folder / f"view{i}.png"), view(board, *pose))
    return folder


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def calibrate(shots, *extra) -> int:
    return main(["calibrate", "camera", "--images", str(shots), "--board", "7,5,0.04,0.03", "--name", "agentview",
                 *extra])


def test_default_is_the_current_folder_and_an_existing_file_needs_force(shots, tmp_path, monkeypatch, capsys):
    shipped = CALIBRATION_DIR / "agentview.yaml"
    before = digest(shipped)
    monkeypatch.chdir(tmp_path)

    assert calibrate(shots) == 0
    out = capsys.readouterr().out
    written = tmp_path / "agentview.yaml"
    assert "wrote agentview.yaml" in out and f"calibration: {written}" in out, out
    assert load_camera_calibration(str(written)).k[0] == pytest.approx(500.0, rel=0.02)
    assert digest(shipped) == before  # the checkout's file the twin reads is untouched

    written.write_text(written.read_text() + "# mine\n")
    mine = digest(written)
    assert calibrate(shots) == 1
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == ["error: agentview.yaml exists; pass --force to replace it (its extrinsics "
                                        "are kept unless --board-pose is given), or --out DIR to write elsewhere"], err
    assert "images" not in out and "Traceback" not in err  # refused before the work, in one line
    assert digest(written) == mine

    assert calibrate(shots, "--force") == 0
    assert digest(written) != mine and "# mine" not in written.read_text()
    assert digest(shipped) == before


def test_out_into_the_shipped_folder_is_refused_too(shots, capsys):
    shipped = CALIBRATION_DIR / "agentview.yaml"
    before = digest(shipped)
    assert calibrate(shots, "--out", str(CALIBRATION_DIR)) == 1
    assert f"error: {shipped} exists; pass --force" in capsys.readouterr().err
    assert digest(shipped) == before
