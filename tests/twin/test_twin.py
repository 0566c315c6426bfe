"""The SO101 twin on real MuJoCo physics and rendering: scene, joint API, cameras, graphs, pick-and-place."""

import os
import time

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from sgvla.so101.hardware.calibration import load_camera_calibration  # noqa: E402
from sgvla.so101.hardware.joints import JOINTS  # noqa: E402
from sgvla.scene_graph import Triplet  # noqa: E402
from sgvla.so101.twin.config import load_twin_config  # noqa: E402
from sgvla.so101.twin.pick_place import TwinPickPlace  # noqa: E402
from sgvla.so101.twin.scene import optical_rotation  # noqa: E402
from sgvla.so101.twin.twin import So101Twin  # noqa: E402

pytestmark = pytest.mark.sim

# What each task's name states about its start (robot frame: larger y is the robot's left): true of the target
# bowl, black_bowl_1, and false of the other, identical one (the spatial phrase is what tells them apart).
STATED = [
    [("black_bowl_1", "is_on_top_of", "red_drawer")],
    [("black_bowl_1", "is_left_of", "black_stove")],
    [("black_bowl_1", "is_right_of", "black_stove")],
    [("black_bowl_1", "is_on_top_of", "red_drawer"), ("cookie", "is_left_of", "red_drawer")],
    [("black_bowl_1", "is_on_top_of", "red_drawer"), ("cookie", "is_right_of", "red_drawer")],
]


@pytest.fixture(scope="module")
def config():
    return load_twin_config()


@pytest.fixture(scope="module")
def twin(config):
    twin = So101Twin(config, 0)
    yield twin
    twin.close()


def test_scene_renders_plausible_images_and_depth(twin):
    twin.reset(0)
    image = twin.render("agentview")
    assert image.shape == (480, 640, 3) and image.dtype == np.uint8
    assert image.std() > 20 and len(np.unique(image.reshape(-1, 3), axis=0)) > 50
    box = twin.ground_truth(["agentview"])["agentview"].boxes["black_bowl_1"]
    x1, y1, x2, y2 = box
    assert 0 <= x1 < x2 <= 640 and 0 <= y1 < y2 <= 480
    depth = twin.render_depth("agentview")
    assert depth.shape == (480, 640) and depth.dtype == np.float32
    bowl_depth = float(np.median(depth[y1:y2, x1:x2]))
    camera = twin.camera_pose("agentview")
    expected = np.linalg.inv(camera)[:3] @ np.r_[twin.scene().position("black_bowl_1"), 1.0]
    assert abs(bowl_depth - expected[2]) < 0.06  # the bowl's pixels are about as far as the bowl
    assert 0.3 < bowl_depth < 1.0
    # The black bowl is dark where its box is, against a brighter table around it.
    assert image[y1:y2, x1:x2].mean() < image.mean()
    small = twin.render("wrist", 160, 120)
    assert small.shape == (120, 160, 3)
    with pytest.raises(ValueError, match="unknown camera"):
        twin.render("nope")
    with pytest.raises(ValueError, match="image size"):
        twin.render("agentview", 4000, 3000)


def test_agentview_pose_is_the_calibration_extrinsic(twin, config):
    calibration = load_camera_calibration(config.agentview_calibration)
    pose = twin.camera_pose("agentview")
    np.testing.assert_allclose(pose[:3, 3], calibration.translation, atol=1e-9)
    np.testing.assert_allclose(pose[:3, :3], optical_rotation(calibration), atol=1e-6)
    K = twin.intrinsics("agentview", calibration.width, calibration.height)
    np.testing.assert_allclose(K, np.array(calibration.k).reshape(3, 3), atol=1e-6)
    # A point on the optical axis projects to the image centre of the rendered camera too.
    centre = pose[:3, 3] + pose[:3, 2] * 0.5
    cam = np.linalg.inv(pose) @ np.r_[centre, 1.0]
    assert np.allclose((K @ cam[:3] / cam[2])[:2], [320, 240])


def test_joint_targets_are_reached_in_physics(twin):
    twin.reset(1)
    targets = {"shoulder_pan": 0.4, "shoulder_lift": -1.2, "elbow_flex": 1.0, "wrist_flex": 0.6, "wrist_roll": -0.5,
               "gripper": 0.8}
    twin.set_joint_targets(targets)
    assert twin.joint_targets() == pytest.approx(targets, abs=1e-12)
    twin.advance(1.5)
    reached = twin.joint_positions()
    assert set(reached) == set(JOINTS)
    for joint, value in targets.items():
        assert reached[joint] == pytest.approx(value, abs=0.05), joint
    assert max(abs(v) for v in twin.joint_velocities().values()) < 0.05
    twin.set_joint_targets({"gripper": 99.0})  # clamped to the actuator's range
    assert twin.joint_targets()["gripper"] == pytest.approx(twin.model.actuator("gripper").ctrlrange[1])
    with pytest.raises(ValueError, match="unknown joint"):
        twin.set_joint_targets({"elbow": 0.0})
    with pytest.raises(ValueError, match="non-negative"):
        twin.advance(-1.0)


def test_reset_is_seeded(twin):
    twin.reset(5)
    first = twin.scene().positions
    twin.advance(0.2)
    twin.reset(5)
    np.testing.assert_array_equal(twin.scene().positions, first)
    twin.reset(6)
    assert not np.allclose(twin.scene().positions, first)


@pytest.mark.parametrize("task_id", range(5))
def test_ground_truth_states_the_task_name(config, task_id):
    twin = So101Twin(config, task_id)
    try:
        view = twin.ground_truth(["agentview"])["agentview"]
        assert {"black_bowl_1", "black_bowl_2"} <= set(view.boxes)  # both bowls in view, by instance name
        for triplet in STATED[task_id]:
            assert Triplet(*triplet) in view.graph.triplets, (twin.task, triplet)
            if triplet[0] == "black_bowl_1":
                assert Triplet("black_bowl_2", *triplet[1:]) not in view.graph.triplets, (twin.task, triplet)
        assert not twin.success()
    finally:
        twin.close()


def test_pick_place_succeeds_on_all_five_tasks(config):
    """The IK controller moves the bowl onto the place object in physics for every task (about 30 s)."""
    results = {}
    for task_id in range(5):
        twin = So101Twin(config, task_id)
        try:
            twin.reset(task_id)
            controller = TwinPickPlace(twin.model, config, "black_bowl_1", twin.layout.place)
            start = time.perf_counter()
            for step in range(300):
                twin.set_joint_targets(dict(zip(JOINTS, controller.act(twin.scene()))))
                twin.advance(twin.control_period)
                if twin.success():
                    break
            results[task_id] = (twin.success(), step + 1, round(time.perf_counter() - start, 1))
            place = twin.scene().position(twin.layout.place)
            bowl = twin.scene().position("black_bowl_1")
            if results[task_id][0]:
                assert np.linalg.norm((bowl - place)[:2]) < 0.05
        finally:
            twin.close()
    print("pick-and-place (success, control steps, wall s) per task:", results)
    assert all(ok for ok, _, _ in results.values()), results
