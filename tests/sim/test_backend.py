"""The backend on unperturbed LIBERO-Spatial: every task resets and steps offline, observations are
LeRobot's, boxes match the stored images, graphs come per camera, resets are deterministic."""

import mujoco
import numpy as np
import pytest

from sgvla.scene_graph import load_ontology
from sgvla.core.state import box_to_policy_frame
from sgvla.libero.tasks import task_info

pytestmark = pytest.mark.sim

OBJECTS = set(load_ontology("libero_spatial").objects)
OPEN_HOLD = np.array([0, 0, 0, 0, 0, 0, -1.0])


@pytest.mark.parametrize("task_id", range(10))
def test_every_task_resets_steps_and_reports(backends, task_id):
    backend = backends(task_id, render_images=False)
    obs = backend.reset(seed=task_id)
    assert backend.task == task_info(task_id).language == obs.policy["task"][0]
    assert tuple(obs.policy["observation.state"].shape) == (1, 8)
    for _ in range(3):
        obs, success, done = backend.step(OPEN_HOLD)
    assert (success, done, backend.steps, backend.max_steps) == (False, False, 3, 280)
    scene = backend.scene()
    assert set(scene.objects) == OBJECTS
    graphs = backend.ground_truth()
    assert set(graphs) == {"agentview", "robot0_eye_in_hand"}
    visible = len(graphs["agentview"].boxes)
    assert visible >= 6 and len(graphs["agentview"].graph) == visible * (visible - 1)


def test_observation_is_what_lerobot_feeds_policies(backends):
    backend = backends(0)
    obs = backend.reset(seed=0)
    image, wrist = obs.policy["observation.images.image"], obs.policy["observation.images.image2"]
    assert tuple(image.shape) == tuple(wrist.shape) == (1, 3, 64, 64)
    assert obs.policy["task"] == [backend.task]
    # LeRobot's LiberoProcessorStep rotates the stored (bottom-up) images by 180 degrees.
    stored = obs.images["agentview"]
    np.testing.assert_allclose(image[0].numpy(), stored[::-1, ::-1].transpose(2, 0, 1) / 255.0, atol=1e-6)
    state = obs.policy["observation.state"][0].numpy()
    np.testing.assert_allclose(state[:3], obs.raw["robot_state"]["eef"]["pos"], atol=1e-5)
    np.testing.assert_allclose(state[6:], obs.raw["robot_state"]["gripper"]["qpos"], atol=1e-5)
    assert box_to_policy_frame((10, 20, 30, 40), 64, 64) == (34, 24, 54, 44)


def test_boxes_contain_the_objects_in_stored_images(backends):
    """Segment each view with MuJoCo (rows top-down), flip it to LIBERO's stored convention (robosuite
    renders OpenGL-style, rows bottom-up) and check every projected box holds its object's pixels."""
    import robosuite.macros

    assert robosuite.macros.IMAGE_CONVENTION == "opengl"
    backend = backends(0)
    backend.reset(seed=0)
    model, data = backend.sim.model._model, backend.sim.data._data
    index = backend.env.index
    owner = dict(zip(index.geom_ids.tolist(), index.geom_object.tolist()))
    with mujoco.Renderer(model, 64, 64) as renderer:
        renderer.enable_segmentation_rendering()
        for view in ("agentview", "robot0_eye_in_hand"):
            renderer.update_scene(data, camera=view)
            seg = renderer.render()[::-1]
            graph = backend.ground_truth([view])[view]
            checked = 0
            for column, name in enumerate(index.names):
                geoms = [g for g, o in owner.items() if o == column]
                pixels = np.argwhere((seg[..., 1] == mujoco.mjtObj.mjOBJ_GEOM) & np.isin(seg[..., 0], geoms))
                if len(pixels) < 10:
                    continue
                (y1, x1), (y2, x2) = pixels.min(0), pixels.max(0) + 1
                bx1, by1, bx2, by2 = graph.boxes[name]
                assert bx1 <= x1 + 1 and by1 <= y1 + 1 and x2 <= bx2 + 1 and y2 <= by2 + 1, (view, name)
                checked += 1
            assert checked >= 3, view


def test_fixed_cameras_cached_wrist_recomputed(backends):
    backend = backends(0, render_images=False)
    backend.reset(seed=1)
    before = backend.scene().cameras
    for _ in range(5):
        backend.step(np.array([0.0, 0.0, 1.0, 0, 0, 0, -1]))
    after = backend.scene().cameras
    assert after["agentview"] is before["agentview"]
    assert not np.allclose(after["robot0_eye_in_hand"].cam_to_world, before["robot0_eye_in_hand"].cam_to_world)


def test_same_seed_same_scene(backends):
    backend = backends(3, render_images=False)
    first = backend.reset(seed=7) and backend.scene()
    graph = backend.ground_truth()["agentview"].graph
    backend.reset(seed=8)
    assert not np.allclose(backend.scene().positions, first.positions)
    backend.reset(seed=7)
    np.testing.assert_array_equal(backend.scene().positions, first.positions)
    assert backend.ground_truth()["agentview"].graph == graph
    assert backend.env.init_state_index == 7


def test_unknown_task_and_profile():
    from sgvla.libero.env import make_backend

    with pytest.raises(ValueError, match="task id 12"):
        make_backend(12)
    with pytest.raises(ValueError, match="unknown render profile 'pretty'"):
        make_backend(0, render_profile="pretty")


def same_tree(ours, theirs, where: str = "") -> None:
    """Every array of two nested observations equal, bit for bit, under the same keys."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) == set(theirs), (where, set(ours), set(theirs))
        for key in theirs:
            same_tree(ours[key], theirs[key], f"{where}/{key}")
    else:
        np.testing.assert_array_equal(ours, theirs, err_msg=where)


def test_reference_profile_steps_as_lerobots_env(backends):
    """With the reference profile and no perturbation, sgvla's LIBERO env (which imports neither LeRobot nor torch)
    and LeRobot's own LIBERO env, made as `lerobot-eval` makes it, give the same observation (images and robot state)
    at the reset and after every step of the same actions, and the same success."""
    from lerobot.envs.configs import LiberoEnv as LiberoEnvConfig
    from lerobot.envs.libero import LiberoEnv
    from libero.libero import benchmark

    ours = backends(1, render_profile="reference", image_size=32)
    config = LiberoEnvConfig(task="libero_spatial", observation_height=32, observation_width=32)
    suite = benchmark.get_benchmark_dict()["libero_spatial"]()
    env = LiberoEnv(suite, 1, "libero_spatial", camera_name=config.camera_name, episode_index=0,
                    **{k: v for k, v in config.gym_kwargs.items() if k != "task_ids"})
    try:
        theirs, _ = env.reset(seed=0)
        same_tree(ours.reset(seed=0).raw, theirs)
        rng = np.random.default_rng(0)
        for step in range(6):
            action = np.r_[rng.uniform(-0.6, 0.6, 6), 1.0 if step > 2 else -1.0]
            obs, success, _ = ours.step(action)
            theirs, _, _, _, info = env.step(action)
            same_tree(obs.raw, theirs, f"step {step}")
            assert success == info["is_success"]
    finally:
        env.close()


def test_lerobots_libero_conventions():
    """The constants sgvla's LIBERO env holds for LeRobot's LIBERO env (it imports no LeRobot) are LeRobot's."""
    import inspect

    from lerobot.envs.configs import LiberoEnv as LiberoEnvConfig
    from lerobot.envs.libero import TASK_SUITE_MAX_STEPS, LiberoEnv, get_libero_dummy_action

    from sgvla.libero import env
    from sgvla.libero.tasks import MAX_STEPS, SUITE

    config = LiberoEnvConfig(task=SUITE)
    assert (env.IMAGE_SIZE, env.IMAGE_SIZE) == (config.observation_height, config.observation_width)
    assert env.CONTROL_FREQ == config.fps and (config.obs_type, config.control_mode) == ("pixels_agent_pos", "relative")
    assert env.SETTLE_STEPS == inspect.signature(LiberoEnv).parameters["num_steps_wait"].default
    assert list(env.NO_OP) == get_libero_dummy_action()
    assert MAX_STEPS == TASK_SUITE_MAX_STEPS[SUITE]
