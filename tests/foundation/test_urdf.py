"""urdf/so101.urdf agrees with the MJCF the simulator runs and with LeRobot's joints, and is what the generator writes."""

import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest
import yaml

from sgvla.so101.hardware.calibration import load_camera_calibration
from sgvla.so101.hardware.joints import JOINTS, URDF_LIMITS
from sgvla.paths import CALIBRATION_DIR, URDF_DIR
from sgvla.so101.urdf import CAMERAS, MESH_URI, URDF_NAME, generate, quaternion_to_rpy, source_dir

URDF = URDF_DIR / URDF_NAME


@pytest.fixture(scope="module")
def urdf() -> ET.Element:
    return ET.parse(URDF).getroot()


@pytest.fixture(scope="module")
def mjcf() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(source_dir() / "assets" / "so101_new_calib.xml"))


def revolute(urdf: ET.Element) -> dict[str, ET.Element]:
    return {j.get("name"): j for j in urdf.findall("joint") if j.get("type") == "revolute"}


def body_of(link: str) -> str:
    """The MJCF body of a URDF link: onshape-to-robot names them `<part>` and `<part>_link`."""
    return link.removesuffix("_link")


def floats(text: str) -> np.ndarray:
    return np.array([float(v) for v in text.split()])


def rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    quat = np.zeros(4)
    mujoco.mju_axisAngle2Quat(quat, axis / np.linalg.norm(axis), angle)
    return quat_matrix(quat)


def quat_matrix(wxyz: np.ndarray) -> np.ndarray:
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(wxyz, dtype=float))
    return mat.reshape(3, 3)


def origin(joint: ET.Element) -> np.ndarray:
    """The joint origin as a 4x4 transform (URDF rpy: fixed-axis x, then y, then z)."""
    o = joint.find("origin")
    roll, pitch, yaw = floats(o.get("rpy"))
    t = np.eye(4)
    t[:3, :3] = rotation(np.array([0, 0, 1.0]), yaw) @ rotation(np.array([0, 1.0, 0]), pitch) @ \
        rotation(np.array([1.0, 0, 0]), roll)
    t[:3, 3] = floats(o.get("xyz"))
    return t


def forward_kinematics(urdf: ET.Element, q: dict[str, float]) -> dict[str, np.ndarray]:
    """Every link's pose in base_link, from the URDF's joint origins and axes alone."""
    poses = {"base_link": np.eye(4)}
    pending = list(urdf.findall("joint"))
    while pending:
        joint = pending.pop(0)
        parent, child = joint.find("parent").get("link"), joint.find("child").get("link")
        if parent not in poses:
            pending.append(joint)
            continue
        motion = np.eye(4)
        if joint.get("type") == "revolute":
            motion[:3, :3] = rotation(floats(joint.find("axis").get("xyz")), q[joint.get("name")])
        poses[child] = poses[parent] @ origin(joint) @ motion
    return poses


def test_revolute_joints_and_limits_match_the_mjcf_and_lerobot(urdf, mjcf):
    joints = revolute(urdf)
    assert sorted(joints) == sorted(JOINTS) == sorted(mjcf.joint(i).name for i in range(mjcf.njnt))
    for name, joint in joints.items():
        limit = joint.find("limit")
        lo, hi = float(limit.get("lower")), float(limit.get("upper"))
        assert (lo, hi) == URDF_LIMITS[name]
        np.testing.assert_allclose((lo, hi), mjcf.joint(name).range, atol=1e-4, err_msg=name)


def test_the_chain_links_the_same_bodies_in_the_same_order(urdf, mjcf):
    joints = revolute(urdf)
    chain, link = [], "base_link"
    by_parent = {j.find("parent").get("link"): j for j in joints.values()}
    while link in by_parent:
        joint = by_parent.pop(link)
        child = joint.find("child").get("link")
        body = mjcf.joint(joint.get("name")).bodyid[0]
        assert (body_of(link), body_of(child)) == (mjcf.body(mjcf.body_parentid[body]).name, mjcf.body(body).name)
        chain.append(joint.get("name"))
        link = child if child in by_parent else "gripper_link"  # the jaw hangs off the gripper link
    assert chain == list(JOINTS)


def test_every_mesh_is_in_the_package_meshes_folder(urdf):
    names = {m.get("filename") for m in urdf.iter("mesh")}
    assert names and all(n.startswith(MESH_URI) for n in names), names
    files = {n.removeprefix(MESH_URI) for n in names}
    assert files == {p.name for p in (URDF_DIR / "meshes").iterdir()}


def test_the_generator_reproduces_the_committed_files(tmp_path):
    path = generate(tmp_path)
    assert path.read_bytes() == URDF.read_bytes(), "urdf/so101.urdf is stale: run python -m sgvla.so101.urdf"
    for mesh in (tmp_path / "meshes").iterdir():
        assert mesh.read_bytes() == (URDF_DIR / "meshes" / mesh.name).read_bytes(), mesh.name


def test_camera_frames_are_the_calibrated_extrinsics(urdf):
    joints = {j.find("child").get("link"): j for j in urdf.findall("joint")}
    for camera in CAMERAS:
        calibration = load_camera_calibration(camera)
        joint = joints[f"{camera}_optical_frame"]
        assert joint.get("type") == "fixed" and joint.find("parent").get("link") == calibration.parent_frame
        x, y, z, w = calibration.rotation_xyzw
        expected = quat_matrix(np.array([w, x, y, z]) / np.linalg.norm([w, x, y, z]))
        np.testing.assert_allclose(origin(joint)[:3, :3], expected, atol=1e-7)
        np.testing.assert_allclose(origin(joint)[:3, 3], calibration.translation)
    with pytest.raises(ValueError, match="zero length"):
        quaternion_to_rpy((0.0, 0.0, 0.0, 0.0))


def test_an_unknown_camera_parent_frame_is_an_error(tmp_path):
    for camera in CAMERAS:
        data = yaml.safe_load((CALIBRATION_DIR / f"{camera}.yaml").read_text())
        data["extrinsics"]["parent_frame"] = "hand_link"
        (tmp_path / f"{camera}.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="parent_frame 'hand_link' is not a link"):
        generate(tmp_path / "out", tmp_path)


def test_forward_kinematics_matches_mujoco(urdf, mjcf):
    """Link frames computed from the URDF alone land where MuJoCo puts the MJCF bodies (1 mm, 0.06 deg)."""
    data = mujoco.MjData(mjcf)
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = {j: rng.uniform(*URDF_LIMITS[j]) for j in JOINTS}
        for name, value in q.items():
            data.qpos[mjcf.joint(name).qposadr[0]] = value
        mujoco.mj_kinematics(mjcf, data)
        poses = forward_kinematics(urdf, q)
        for link, pose in poses.items():
            body = body_of(link)
            if mujoco.mj_name2id(mjcf, mujoco.mjtObj.mjOBJ_BODY, body) < 0:
                continue  # the gripper frame and camera frames, checked below / above
            np.testing.assert_allclose(pose[:3, 3], data.body(body).xpos, atol=1e-3, err_msg=link)
            np.testing.assert_allclose(pose[:3, :3], data.body(body).xmat.reshape(3, 3), atol=1e-3, err_msg=link)
        np.testing.assert_allclose(poses["gripper_frame_link"][:3, 3], data.site("gripperframe").xpos, atol=1e-3)
