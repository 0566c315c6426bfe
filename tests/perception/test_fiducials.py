"""Marker config checks, the printable sheet (decoded back at true scale), pose fusion, tracking and kinematics."""

from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml
from PIL import Image

from sgvla.cli import main
from sgvla.core.config import ConfigError
from sgvla.so101.kinematics import Kinematics
from sgvla.so101.perception.fiducials import DEFAULT_MARKERS, load_marker_config
from sgvla.so101.perception.live import LivePerception
from sgvla.so101.perception.poses import (
    CameraFrame, CameraModel, FiducialPerception, MarkerDetector, ObjectPose, PoseTracker, Sighting, camera_pose,
    fuse, in_view,
)
from sgvla.so101.hardware.calibration import load_camera_calibration


@pytest.fixture(scope="module")
def markers():
    return load_marker_config()


def _write(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load(DEFAULT_MARKERS.read_text())
    edit(data)
    path = tmp_path / "markers.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.update(dictionary="DICT_9X9_1"), "is not an OpenCV ArUco dictionary; valid: ['DICT_4X4_100'"),
    (lambda d: d["objects"]["cookie"]["markers"][0].update(id=1), "id already used by black_bowl_1"),
    (lambda d: d["objects"]["cookie"]["markers"][0].update(id=50), "id out of DICT_4X4_50's range 0..49"),
    (lambda d: d["objects"]["cookie"]["markers"][0].update(face="bottom"), "face 'bottom' is not one of ['top'"),
    (lambda d: d["objects"]["cookie"]["markers"][0].update(position=[0.2, 0, 0.05]), "lies outside the object's"),
    (lambda d: d["objects"]["cookie"]["markers"][0].update(size=0.2), "hangs over the edge of the top face"),
    (lambda d: d["objects"]["cookie"]["markers"][-1].update(position=[0.05, 0, 0.025]), "needs x = 0.055"),
    (lambda d: d["objects"]["cookie"].update(colour="brown"), "unknown key(s) colour"),
    (lambda d: d.update(max_age_s=-1), "max_age_s must be >= 0"),
    (lambda d: d.update(carry_radius=-0.1), "carry_radius must be >= 0"),
])
def test_bad_marker_configs_are_refused_naming_the_problem(tmp_path, edit, message):
    path = _write(tmp_path, edit)
    with pytest.raises(ConfigError) as error:
        load_marker_config(path)
    assert message in str(error.value)
    assert str(path) in str(error.value)


def test_marker_frames_follow_their_faces(markers):
    """The drawer's front marker faces +x with its top edge up; top markers face up with their top edge to -x."""
    front = next(m for m in markers.objects["red_drawer"].markers if m.face == "front")
    np.testing.assert_allclose(front.rotation, [[0, 0, 1], [1, 0, 0], [0, 1, 0]], atol=1e-12)
    top = next(m for m in markers.objects["cookie"].markers if m.face == "top")
    np.testing.assert_allclose(top.rotation, [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-12)
    for obj in markers.objects.values():
        for m in obj.markers:
            assert np.isclose(np.linalg.det(m.rotation), 1.0)


def test_sheet_decodes_back_to_the_configured_ids_at_true_size(markers, tmp_path):
    dpi = 150
    assert main(["markers", "--out", str(tmp_path / "sheet.png"), "--dpi", str(dpi)]) == 0
    pages = sorted(tmp_path.glob("sheet*.png"))
    detector = cv2.aruco.ArucoDetector(markers.aruco_dictionary, cv2.aruco.DetectorParameters())
    found = {}
    for page in pages:
        image = Image.open(page)
        assert image.info["dpi"] == pytest.approx((dpi, dpi), abs=0.05)  # PNG stores dots per metre
        corners, ids, _ = detector.detectMarkers(np.asarray(image.convert("L")))
        for quad, marker_id in zip(corners, ids.ravel()):
            quad = quad.reshape(4, 2)
            side_px = np.mean(np.linalg.norm(quad - np.roll(quad, 1, axis=0), axis=1))
            found[int(marker_id)] = side_px / dpi * 0.0254  # metres when printed at this dpi
    expected = {m.id: m.size for obj in markers.objects.values() for m in obj.markers}
    assert set(found) == set(expected)
    for marker_id, size in expected.items():
        # corner pixels are ~1 dot inside the square's edge: within 2 dots (0.34 mm at 150 dpi)
        assert abs(found[marker_id] - size) < 2 * 0.0254 / dpi, (marker_id, found[marker_id], size)


def test_sheet_pdf_and_bad_output_suffix(tmp_path, capsys):
    assert main(["markers", "--out", str(tmp_path / "sheet.pdf")]) == 0
    assert (tmp_path / "sheet.pdf").read_bytes().startswith(b"%PDF")
    assert main(["markers", "--out", str(tmp_path / "sheet.jpg")]) == 2
    assert "written as .pdf or .png" in capsys.readouterr().err


def test_markers_command_refuses_a_bad_config(tmp_path, capsys):
    path = _write(tmp_path, lambda d: d["objects"]["cookie"]["markers"][0].update(id=3))
    assert main(["markers", "--config", str(path), "--out", str(tmp_path / "x.png")]) == 2
    assert "marker 3: id already used by" in capsys.readouterr().err


def _synthetic_view(markers, marker_id: int, camera: CameraModel, camera_from_marker: np.ndarray) -> np.ndarray:
    """A gray image of one marker (with its white margin) seen at ``camera_from_marker``: a homography warp."""
    placement = markers.by_id[marker_id][1]
    cell_px = 40
    texture = markers.marker_image(marker_id, cell_px)
    side = texture.shape[0]
    plate = markers.plate_size(placement) / 2
    plate_corners = np.array([[-plate, plate, 0], [plate, plate, 0], [plate, -plate, 0], [-plate, -plate, 0]])
    rvec = cv2.Rodrigues(camera_from_marker[:3, :3])[0]
    pixels, _ = cv2.projectPoints(plate_corners, rvec, camera_from_marker[:3, 3], camera.K, camera.distortion)
    edges = [-0.5, side - 0.5]  # the texture's outer edges (OpenCV puts pixel centres at integers)
    homography = cv2.getPerspectiveTransform(np.float32([[edges[0], edges[0]], [edges[1], edges[0]],
                                                         [edges[1], edges[1]], [edges[0], edges[1]]]),
                                             pixels.reshape(4, 2).astype(np.float32))
    return cv2.warpPerspective(texture, homography, (camera.width, camera.height), borderValue=200)


def test_pnp_recovers_a_known_marker_pose(markers):
    """A marker drawn by an exact homography at a known pose is found there (no upright prior: no camera pose)."""
    camera = CameraModel("test", np.array([[600.0, 0, 320], [0, 600.0, 240], [0, 0, 1]]), np.zeros(5), 640, 480)
    facing = np.diag([1.0, -1.0, -1.0])  # the marker's z towards the camera, its top edge up in the image
    rotation = facing @ cv2.Rodrigues(np.array([0.5, -0.3, 0.1]))[0]  # tilted
    camera_from_marker = np.eye(4)
    camera_from_marker[:3, :3], camera_from_marker[:3, 3] = rotation, [0.03, -0.02, 0.45]
    image = _synthetic_view(markers, 3, camera, camera_from_marker)
    (sighting,) = MarkerDetector(markers).detect(image, camera)
    found = sighting.camera_from_object @ markers.by_id[3][1].object_from_marker
    assert sighting.name == "red_drawer" and sighting.marker_ids == (3,)
    assert np.linalg.norm(found[:3, 3] - camera_from_marker[:3, 3]) < 2.5e-3  # at 0.45 m: a 0.3 px corner bias
    angle = np.degrees(np.arccos(np.clip((np.trace(found[:3, :3].T @ rotation) - 1) / 2, -1, 1)))
    assert angle < 1.5
    assert sighting.error_px < 0.5


def test_fusion_weights_views_by_error_and_distance():
    near, far = np.eye(4), np.eye(4)
    near[:3, 3], far[:3, 3] = [0.2, 0.0, 0.0], [0.3, 0.0, 0.0]
    sightings = [Sighting("cookie", "a", near, 0.5, 0.4, (7,)), Sighting("cookie", "b", far, 0.5, 0.8, (8,))]
    (pose,) = fuse(sightings, {"a": np.eye(4), "b": np.eye(4)}, 1.0).values()
    # weights 1 / (1^2 * 0.4^2) and 1 / (1^2 * 0.8^2): 4 to 1
    assert pose.position[0] == pytest.approx((4 * 0.2 + 0.3) / 5)
    assert pose.markers == 2 and pose.seen_at == 1.0


def test_tracker_keeps_a_pose_up_to_max_age_then_drops_it():
    tracker = PoseTracker(max_age_s=0.5)
    pose = ObjectPose("cookie", np.eye(4), 0.0, 1, 0.3)
    assert set(tracker.update(0.0, {"cookie": pose})) == {"cookie"}
    assert tracker.update(0.5, {})["cookie"].seen_at == 0.0  # held through the occlusion
    assert tracker.update(0.51, {}) == {}  # then dropped
    with pytest.raises(ValueError, match="max_age_s must be >= 0"):
        PoseTracker(-1)


def test_only_frames_that_could_show_an_object_age_it():
    """Cameras deliver frames at their own rates: the wrist camera's frames, which never show the bowl, do not age
    it out between the agent view's (on a loaded machine, seconds apart); the agent view's frame that misses it
    does. The bowl sits 0.4 m in front of the agent view; the wrist camera looks away from it."""
    K = np.array([[300.0, 0, 160], [0, 300.0, 120], [0, 0, 1]])
    agent, wrist = (CameraModel(n, K, np.zeros(5), 320, 240) for n in ("agentview", "wrist"))
    agent_pose, wrist_pose = np.eye(4), _at(0.0, 0.0, 0.5)  # both look along +z; the wrist camera past the bowl
    bowl = ObjectPose("black_bowl_1", _at(0.0, 0.0, 0.4), 0.0, 1, 0.3)
    assert in_view(agent, agent_pose, bowl.position) and not in_view(wrist, wrist_pose, bowl.position)
    assert not in_view(agent, agent_pose, [2.0, 0.0, 0.4])  # beside the image
    perception = FiducialPerception(load_marker_config(), max_age_s=0.5)
    perception.tracker.update(0.0, {bowl.name: bowl})
    blank = np.full((240, 320, 3), 255, np.uint8)  # no markers in either camera's frame
    for t in (0.4, 1.0, 2.5):
        assert set(perception.update(t, [CameraFrame(wrist, blank, wrist_pose)])) == {bowl.name}
    assert perception.update(2.6, [CameraFrame(agent, blank, agent_pose)]) == {}


def _at(x: float, y: float, z: float) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, 3] = [x, y, z]
    return pose


def test_an_object_in_the_closed_gripper_follows_it_while_unseen():
    tracker = PoseTracker(max_age_s=0.5, carry_radius=0.08)
    bowl, plate = ObjectPose("bowl", _at(0.2, 0.0, 0.0), 0.0, 1, 0.3), ObjectPose("plate", _at(0.3, 0.0, 0.0), 0.0, 1, 0.3)
    tracker.update(0.0, {"bowl": bowl, "plate": plate}, _at(0.2, 0.0, 0.05), gripper_closed=False)
    # closed over the bowl, whose marker the jaws now hide: it is taken (the plate is farther than carry_radius)
    poses = tracker.update(0.1, {"plate": plate}, _at(0.2, 0.0, 0.05), gripper_closed=True)
    assert poses["bowl"].carried and not poses["plate"].carried
    # lifted and moved, for longer than max_age_s: the bowl follows the gripper
    poses = tracker.update(1.0, {}, _at(0.25, 0.1, 0.15), gripper_closed=True)
    np.testing.assert_allclose(poses["bowl"].position, [0.25, 0.1, 0.1])
    assert "plate" not in poses  # unseen for 1 s: dropped
    # released: held where it was let go, then aged out like any other pose
    poses = tracker.update(1.2, {}, _at(0.25, 0.1, 0.15), gripper_closed=False)
    assert not poses["bowl"].carried and poses["bowl"].seen_at == 1.0
    assert tracker.update(1.6, {}, _at(0.25, 0.1, 0.15)) == {}
    # a closed gripper far from everything takes nothing
    far = PoseTracker(max_age_s=0.5, carry_radius=0.08)
    far.update(0.0, {"bowl": bowl})
    assert not far.update(0.1, {}, _at(0.5, 0.0, 0.2), gripper_closed=True)["bowl"].carried


def test_wrist_camera_pose_needs_joints_and_follows_the_urdf():
    kinematics = Kinematics()
    wrist = CameraModel.from_calibration(load_camera_calibration("wrist"))
    with pytest.raises(ValueError, match="needs the kinematics and the current joint positions"):
        camera_pose(wrist)
    joints = {"shoulder_pan": 0.3, "shoulder_lift": -0.5, "elbow_flex": 0.7, "wrist_flex": 0.2, "wrist_roll": -0.4}
    # the URDF's own optical frame (generated from the same calibration file) is where the camera is
    np.testing.assert_allclose(camera_pose(wrist, kinematics, joints),
                               kinematics.link_pose("wrist_optical_frame", joints), atol=1e-6)
    with pytest.raises(ValueError, match="joint 'wrist_roll'"):
        kinematics.link_pose("gripper_link", {k: v for k, v in joints.items() if k != "wrist_roll"})
    with pytest.raises(ValueError, match="unknown link 'hand'"):
        kinematics.link_pose("hand", joints)
    agent = CameraModel.from_calibration(load_camera_calibration("agentview"))
    np.testing.assert_allclose(camera_pose(agent), kinematics.link_pose("agentview_optical_frame", {}), atol=1e-6)



def test_live_cameras_keep_the_configured_order_whatever_order_their_intrinsics_come_in(markers):
    """ObjectStates lists per-camera visibility and boxes by position: a wrist camera_info that arrives before the
    agent view's (DDS gives no order between topics) must not swap the columns (a CI failure once)."""
    joints = {"shoulder_pan": 0.0, "shoulder_lift": 0.0, "elbow_flex": 0.0, "wrist_flex": 0.0, "wrist_roll": 0.0,
              "gripper": 0.0}
    live = LivePerception(markers, {n: load_camera_calibration(n) for n in ("agentview", "wrist")}, 0.2)
    K = np.array([[300.0, 0, 160], [0, 300.0, 120], [0, 0, 1]])
    assert live.waiting_for(joints) == ["agentview intrinsics", "wrist intrinsics"]
    live.set_intrinsics("wrist", K, np.zeros(5), 320, 240)
    live.set_intrinsics("agentview", K, np.zeros(5), 320, 240)
    live.update(0.0, {}, joints)
    assert list(live.graphs({}, "task")) == ["agentview", "wrist"]
    live.update(0.1, {}, None)  # without joint states the wrist camera cannot be placed
    assert list(live.graphs({}, "task")) == ["agentview"]
