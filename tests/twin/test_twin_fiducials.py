"""Fiducial perception in the twin: the markers are visual only, and poses and graphs from rendered frames of a
scripted pick-and-place match the twin's ground truth (about 20 s)."""

import os

import cv2
import mujoco
import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from sgvla.so101.kinematics import Kinematics  # noqa: E402
from sgvla.so101.perception.fiducials import load_marker_config  # noqa: E402
from sgvla.so101.perception.poses import CameraFrame, FiducialPerception, camera_pose  # noqa: E402
from sgvla.so101.twin.config import BOWLS, load_twin_config  # noqa: E402
from sgvla.so101.twin.fiducial_check import check_episode, summarize, twin_cameras  # noqa: E402
from sgvla.so101.twin.scene import is_marker_geom  # noqa: E402
from sgvla.so101.twin.twin import So101Twin  # noqa: E402

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def config():
    return load_twin_config()


@pytest.fixture(scope="module")
def markers():
    return load_marker_config()


def test_marker_extents_are_the_twins_shapes(config, markers):
    for name, obj in markers.objects.items():
        if name in BOWLS:
            expected = [config.bowl.radius, config.bowl.radius, config.bowl.height / 2]
        else:
            shape = config.shapes[name]
            expected = shape.half_size
            assert obj.cylinder == shape.cylinder, name
        np.testing.assert_allclose(obj.half_size, expected, err_msg=name)


def test_markers_change_neither_physics_nor_ground_truth(config):
    """Marker plates collide with nothing and weigh nothing: the same steps give the same states, and the scene-graph
    geometry leaves them out."""
    plain = So101Twin(load_twin_config(overrides={"markers": ""}), 0)
    marked = So101Twin(config, 0)
    try:
        model = marked.model
        plates = [g for g in range(model.ngeom) if is_marker_geom(model.geom(g).name)]
        assert len(plates) == sum(len(load_marker_config().objects[n].markers) for n in marked.index.names)
        assert model.ngeom == plain.model.ngeom + len(plates)
        assert not model.geom_contype[plates].any() and not model.geom_conaffinity[plates].any()
        np.testing.assert_array_equal(model.body_mass, plain.model.body_mass)
        np.testing.assert_array_equal(model.body_inertia, plain.model.body_inertia)
        for twin in (plain, marked):
            twin.reset(3)
            twin.set_joint_targets({"shoulder_pan": 0.4, "shoulder_lift": -0.6, "elbow_flex": 0.5})
            twin.advance(0.5)
        np.testing.assert_array_equal(marked.data.qpos, plain.data.qpos)
        a, b = marked.scene(), plain.scene()
        np.testing.assert_array_equal(a.geoms.centers, b.geoms.centers)
        np.testing.assert_array_equal(a.geoms.half_sizes, b.geoms.half_sizes)
        assert marked.ground_truth() == plain.ground_truth()
    finally:
        plain.close()
        marked.close()


def test_poses_and_graphs_over_a_pick_and_place(config, markers):
    """Task 0, every 6th control step, both cameras at 640x480, the wrist camera placed by forward kinematics."""
    frames = list(check_episode(config, markers, task_id=0, seed=0, every=6))
    rgbd = summarize(frames)
    print("RGB-D:", rgbd)
    assert rgbd.frames >= 25
    assert rgbd.median_mm < 3.0 and rgbd.p95_mm < 10.0
    assert rgbd.status_counts["seen"] > 0.7 * rgbd.frames * 5
    assert rgbd.f1_true_poses["agentview"] == 1.0  # the configured extents alone lose no triplet in this view
    assert rgbd.f1["agentview"] > 0.9
    assert rgbd.status_counts["carried"] > 0 and rgbd.carried_median_mm < 30.0  # the bowl in the jaws
    rgb = summarize(list(check_episode(config, markers, task_id=0, seed=0, every=30, depth=False)))
    print("RGB:", rgb)
    assert rgb.median_mm < 15.0


def test_an_occluded_object_is_held_up_to_max_age_then_dropped(config, markers):
    """The cookie's markers painted over (an occluder in front of them): its pose is kept from the last sighting
    while younger than max_age_s, then dropped; the other objects stay seen."""
    twin = So101Twin(config, 0)
    try:
        twin.reset(0)
        cameras = twin_cameras(twin, 640, 480)
        agent = cameras["agentview"]
        image = twin.render("agentview", 640, 480)
        perception = FiducialPerception(markers, max_age_s=0.5)
        world_from_camera = camera_pose(agent)
        first = perception.update(0.0, [CameraFrame(agent, image, world_from_camera)])
        assert "cookie" in first
        hidden = image.copy()
        cookie_ids = [m.id for m in markers.objects["cookie"].markers]
        for marker_id, quad in perception.detector.markers(image, agent).items():
            if marker_id in cookie_ids:
                centre = quad.mean(axis=0)
                cv2.fillConvexPoly(hidden, (centre + 1.4 * (quad - centre)).astype(np.int32), (150, 90, 40))
        held = perception.update(0.4, [CameraFrame(agent, hidden, world_from_camera)])
        assert held["cookie"].seen_at == 0.0 and held["cookie"] is first["cookie"]
        assert all(held[n].seen_at == 0.4 for n in first if n != "cookie")
        dropped = perception.update(0.6, [CameraFrame(agent, hidden, world_from_camera)])
        assert "cookie" not in dropped and set(dropped) == set(first) - {"cookie"}
        # the wrist camera's pose comes from the joints, as on the arm, and matches the simulator's
        np.testing.assert_allclose(camera_pose(cameras["wrist"], Kinematics(), twin.joint_positions()),
                                   twin.camera_pose("wrist"), atol=2e-5)
    finally:
        twin.close()


def test_marker_textures_decode_in_the_render(config, markers):
    """Every marker the agent view sees unoccluded at the start of task 3 decodes to its configured id."""
    twin = So101Twin(config, 3)
    try:
        twin.reset(0)
        agent = twin_cameras(twin, 640, 480)["agentview"]
        found = FiducialPerception(markers).detector.markers(twin.render("agentview", 640, 480), agent)
        assert {1, 2, 7, 8} <= set(found)
        assert mujoco.mj_name2id(twin.model, mujoco.mjtObj.mjOBJ_TEXTURE, "aruco_7") >= 0
    finally:
        twin.close()
