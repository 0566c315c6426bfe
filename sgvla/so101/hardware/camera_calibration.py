"""ChArUco camera calibration: intrinsics from several views of the board, and the camera's pose in
the arm's base frame from one view of the board lying at a known pose in that frame.

ChArUco rather than a plain checkerboard because the corners are identified by their markers: a
partly hidden or tilted board still counts, and one view fixes the board's orientation, which the
extrinsic calibration needs. Uses the OpenCV 4.7+ API (CharucoDetector, Board.matchImagePoints,
calibrateCamera), which OpenCV 5 keeps; contrib's calibrateCameraCharuco is not in the main package.

The board frame is OpenCV's: origin at the top-left corner of the board as generated/printed, x to
the right along the first row, y down the image, z into the board (away from the printed face).
"""

from __future__ import annotations

import glob
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import cv2
import numpy as np
import yaml

from sgvla.so101.hardware.calibration import CalibrationError, CameraCalibration

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff"}
# Fewer corners than this, or corners on one line, do not constrain a view's homography well.
MIN_CORNERS = 6
# Each planar view gives two constraints on the intrinsics: three views for fx, fy, cx, cy and distortion.
MIN_IMAGES = 3
# A file among the views that OpenCV cannot decode is skipped like a view without the board: the views that remain
# decide the calibration (at least MIN_IMAGES, each one's reprojection error printed), and a folder of shots with a
# half-written or stray file in it need not be cleaned by hand. The extrinsic image, a single required view, must be
# readable.
UNREADABLE = "not a readable image: OpenCV cannot decode it (damaged, truncated, or not an image)"


@dataclass(frozen=True)
class BoardSpec:
    """A ChArUco board: squares across and down, square and marker side in metres, ArUco dictionary."""

    squares_x: int
    squares_y: int
    square_m: float
    marker_m: float
    dictionary: str = "DICT_5X5_100"

    def __post_init__(self):
        if self.squares_x < 2 or self.squares_y < 2 or self.squares_x * self.squares_y < 6:
            raise CalibrationError(f"board of {self.squares_x}x{self.squares_y} squares has too few inner corners; "
                                   "use at least 3x3 squares")
        if not 0 < self.marker_m < self.square_m:
            raise CalibrationError(f"board marker side {self.marker_m} m must be positive and smaller than the "
                                   f"square side {self.square_m} m")
        if not self.dictionary.startswith("DICT_") or not hasattr(cv2.aruco, self.dictionary):
            names = sorted(n for n in dir(cv2.aruco) if n.startswith("DICT_"))
            raise CalibrationError(f"unknown ArUco dictionary '{self.dictionary}'; choose one of {names}")
        markers = self.squares_x * self.squares_y // 2
        available = len(cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary)).bytesList)
        if markers > available:
            raise CalibrationError(f"board of {self.squares_x}x{self.squares_y} squares needs {markers} markers, "
                                   f"{self.dictionary} has {available}")

    @classmethod
    def parse(cls, text: str) -> BoardSpec:
        """``squares_x,squares_y,square_m,marker_m[,dictionary]``, e.g. ``7,5,0.04,0.03,DICT_5X5_100``."""
        parts = [p.strip() for p in text.split(",")]
        if len(parts) not in (4, 5):
            raise CalibrationError(f"board '{text}': expected squares_x,squares_y,square_m,marker_m[,dictionary]")
        try:
            squares, sizes = (int(parts[0]), int(parts[1])), (float(parts[2]), float(parts[3]))
        except ValueError:
            raise CalibrationError(f"board '{text}': squares must be integers and sizes numbers in metres") from None
        return cls(*squares, *sizes, *parts[4:])

    def board(self) -> cv2.aruco.CharucoBoard:
        dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary))
        return cv2.aruco.CharucoBoard((self.squares_x, self.squares_y), self.square_m, self.marker_m, dictionary)


@dataclass(frozen=True)
class Pose:
    """A frame's pose in a parent frame: parent <- frame."""

    translation: tuple[float, float, float]
    rotation_xyzw: tuple[float, float, float, float]

    @classmethod
    def parse(cls, text: str) -> Pose:
        """``x,y,z,qx,qy,qz,qw`` in metres and a quaternion (normalised here)."""
        try:
            values = [float(v) for v in text.split(",")]
        except ValueError:
            values = []
        if len(values) != 7 or np.linalg.norm(values[3:]) < 1e-6:
            raise CalibrationError(f"pose '{text}': expected x,y,z,qx,qy,qz,qw (metres, a non-zero quaternion)")
        norm = float(np.linalg.norm(values[3:]))
        return cls(tuple(values[:3]), tuple(v / norm for v in values[3:]))

    def matrix(self) -> np.ndarray:
        x, y, z, w = np.array(self.rotation_xyzw) / np.linalg.norm(self.rotation_xyzw)
        half = np.arctan2(np.linalg.norm([x, y, z]), w)
        axis = np.array([x, y, z]) / max(np.linalg.norm([x, y, z]), 1e-12)
        transform = np.eye(4)
        transform[:3, :3] = cv2.Rodrigues(axis * 2 * half)[0]
        transform[:3, 3] = self.translation
        return transform

    @classmethod
    def from_matrix(cls, transform: np.ndarray) -> Pose:
        rvec = cv2.Rodrigues(np.ascontiguousarray(transform[:3, :3]))[0].ravel()
        angle = np.linalg.norm(rvec)
        xyz = rvec / angle * np.sin(angle / 2) if angle > 1e-12 else np.zeros(3)
        return cls(tuple(float(v) for v in transform[:3, 3]), (*(float(v) for v in xyz), float(np.cos(angle / 2))))


@dataclass(frozen=True)
class Detection:
    """The board corners found in one image: board-frame points (N, 3) and their pixels (N, 2)."""

    object_points: np.ndarray
    image_points: np.ndarray


def detect(image: np.ndarray, spec: BoardSpec) -> Detection:
    board = spec.board()
    gray = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    corners, ids, _, _ = cv2.aruco.CharucoDetector(board).detectBoard(gray)
    if ids is None or len(ids) < MIN_CORNERS or board.checkCharucoCornersCollinear(ids):
        return Detection(np.zeros((0, 3), np.float32), np.zeros((0, 2), np.float32))
    obj, img = board.matchImagePoints(corners, ids)
    return Detection(obj.reshape(-1, 3).astype(np.float32), img.reshape(-1, 2).astype(np.float32))


def _rms(detection: Detection, rvec, tvec, k: np.ndarray, d: np.ndarray) -> float:
    projected = cv2.projectPoints(detection.object_points, rvec, tvec, k, d)[0].reshape(-1, 2)
    return float(np.sqrt(np.mean(np.sum((projected - detection.image_points) ** 2, axis=1))))


@dataclass(frozen=True)
class Intrinsics:
    """A calibration's result; ``per_image`` is each used view's RMS reprojection error (pixels)."""

    width: int
    height: int
    k: np.ndarray  # (3, 3)
    d: np.ndarray  # (5,) plumb_bob k1 k2 p1 p2 k3
    rms: float
    per_image: dict[str, float]
    corners: dict[str, int]
    skipped: dict[str, str]

    def camera_info(self, name: str, parent_frame: str = "", pose: Pose | None = None) -> CameraCalibration:
        """As ROS camera_calibration writes it (P: the rectified image's camera matrix, alpha 0), with
        the optical frame's ``pose`` in ``parent_frame`` where known."""
        p = np.zeros((3, 4))
        p[:, :3] = cv2.getOptimalNewCameraMatrix(self.k, self.d, (self.width, self.height), 0.0)[0]
        info = CameraCalibration(name, self.width, self.height, "plumb_bob", tuple(self.k.ravel().tolist()),
                                 tuple(self.d.tolist()), tuple(np.eye(3).ravel().tolist()), tuple(p.ravel().tolist()))
        if pose is None:
            return info
        return replace(info, parent_frame=parent_frame, translation=pose.translation, rotation_xyzw=pose.rotation_xyzw)


def calibrate_intrinsics(images: Mapping[str, np.ndarray | None], spec: BoardSpec,
                         k_coefficients: int = 2) -> Intrinsics:
    """Intrinsics from named views of the board (None: a file that could not be read, skipped with the views
    without the board). ``k_coefficients`` 2 fixes k3 at 0, as ROS does by default."""
    if k_coefficients not in (2, 3):
        raise CalibrationError(f"k_coefficients must be 2 or 3, got {k_coefficients}")
    if not images:
        raise CalibrationError("no images to calibrate from")
    skipped = {name: UNREADABLE for name, image in images.items() if image is None}
    readable = {name: image for name, image in images.items() if image is not None}
    if not readable:
        raise CalibrationError(f"none of the {len(images)} images is readable ({', '.join(images)}): {UNREADABLE}")
    sizes = {name: image.shape[:2] for name, image in readable.items()}
    if len(set(sizes.values())) > 1:
        raise CalibrationError(f"images differ in size (height, width): {sizes}")
    height, width = next(iter(sizes.values()))
    detections = {}
    for name, image in readable.items():
        detection = detect(image, spec)
        if len(detection.object_points) >= MIN_CORNERS:
            detections[name] = detection
        else:
            skipped[name] = f"fewer than {MIN_CORNERS} board corners found, or all on one line"
    if len(detections) < MIN_IMAGES:
        raise CalibrationError(f"the board was found in {len(detections)} of {len(images)} images; need at least "
                               f"{MIN_IMAGES} with {MIN_CORNERS}+ corners each (board {spec}). Skipped: {skipped}")
    flags = cv2.CALIB_FIX_K3 if k_coefficients == 2 else 0
    rms, k, d, rvecs, tvecs = cv2.calibrateCamera([v.object_points for v in detections.values()],
                                                  [v.image_points for v in detections.values()],
                                                  (width, height), None, None, flags=flags)
    d = d.ravel()[:5]
    per_image = {name: _rms(det, r, t, k, d) for (name, det), r, t in zip(detections.items(), rvecs, tvecs)}
    return Intrinsics(width, height, k, d, float(rms), per_image,
                      {name: len(det.object_points) for name, det in detections.items()}, skipped)


def camera_pose(image: np.ndarray, spec: BoardSpec, k: np.ndarray, d: np.ndarray,
                board_pose: Pose) -> tuple[Pose, float]:
    """The optical frame's pose in the board pose's parent frame, and the view's RMS reprojection error."""
    detection = detect(image, spec)
    if len(detection.object_points) < MIN_CORNERS:
        raise CalibrationError(f"extrinsic image: fewer than {MIN_CORNERS} board corners found, or all on one line")
    _, rvec, tvec = cv2.solvePnP(detection.object_points, detection.image_points, k, d, flags=cv2.SOLVEPNP_IPPE)
    rvec, tvec = cv2.solvePnPRefineLM(detection.object_points, detection.image_points, k, d, rvec, tvec)
    camera_from_board = np.eye(4)
    camera_from_board[:3, :3] = cv2.Rodrigues(rvec)[0]
    camera_from_board[:3, 3] = tvec.ravel()
    pose = Pose.from_matrix(board_pose.matrix() @ np.linalg.inv(camera_from_board))
    return pose, _rms(detection, rvec, tvec, k, d)


def load_images(dir_or_glob: str) -> dict[str, np.ndarray | None]:
    """Images (BGR) by file name, from a folder or a glob pattern, in name order; None for a file OpenCV cannot
    decode (calibrate_intrinsics skips it and names it)."""
    folder = Path(dir_or_glob).expanduser()
    paths = (sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES) if folder.is_dir()
             else sorted(Path(p) for p in glob.glob(str(folder))))
    if not paths:
        raise CalibrationError(f"no images in or matching '{dir_or_glob}' ({', '.join(sorted(IMAGE_SUFFIXES))})")
    images = {}
    for path in paths:
        images[path.name] = cv2.imread(str(path))  # None when it cannot
    return images


def _matrix(rows: int, cols: int, values) -> dict:
    return {"rows": rows, "cols": cols, "data": [round(float(v), 6) for v in values]}


def write_camera_info(path: str | Path, info: CameraCalibration, comment: str) -> Path:
    """The ROS camera_info YAML that ``load_camera_calibration`` reads, with ``comment`` as its header."""
    data = {"image_width": info.width, "image_height": info.height, "camera_name": info.camera_name,
            "camera_matrix": _matrix(3, 3, info.k), "distortion_model": info.distortion_model,
            "distortion_coefficients": _matrix(1, len(info.d), info.d),
            "rectification_matrix": _matrix(3, 3, info.r), "projection_matrix": _matrix(3, 4, info.p)}
    if info.parent_frame:
        data["extrinsics"] = {"parent_frame": info.parent_frame,
                              "translation": [round(float(v), 6) for v in info.translation],
                              "rotation_xyzw": [round(float(v), 6) for v in info.rotation_xyzw]}
    header = "".join(f"# {line}\n" for line in comment.splitlines())
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=200))
    return path
