"""The twin's render meshes: decimated for drawing only, silhouettes of every link as the full meshes draw them,
physics and collision geometry untouched, generation deterministic and cached by content and settings."""

import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
from sgvla.sim.render_meshes import Decimation, decimated, drawn_faces, mesh_data, render_model  # noqa: E402
from sgvla.so101.hardware.joints import JOINTS  # noqa: E402
from sgvla.so101.twin.config import load_twin_config  # noqa: E402
from sgvla.so101.twin.scene import AGENTVIEW, SO101_XML, WRIST, build_spec  # noqa: E402

pytestmark = pytest.mark.sim

LINKS = ("base", "shoulder", "upper_arm", "lower_arm", "wrist", "gripper", "moving_jaw_so101_v1")
WIDTH, HEIGHT, POSES = 320, 240, 50  # the twin rig's camera size (config/hardware/twin.yaml)
# A link counts for a camera where its masks cover this many pixels over the 50 poses (an average of 100 per pose):
# below it (the shoulder seen by the wrist camera in 3 of 50 poses, 2,200 pixels, IoU 0.96), the ratio is a matter
# of a few edge pixels.
MIN_PIXELS = 5_000


@pytest.fixture(scope="module")
def models():
    config = load_twin_config()
    physics = build_spec(config).compile()
    return physics, render_model(build_spec(config), physics)


def link_masks(model, physics, data, camera, poses):
    """Per pose: (link id per pixel, -1 elsewhere; depth in metres), drawn by ``model`` at ``physics`` poses."""
    seg, dep = mujoco.Renderer(model, HEIGHT, WIDTH), mujoco.Renderer(model, HEIGHT, WIDTH)
    seg.enable_segmentation_rendering()
    dep.enable_depth_rendering()
    qpos = [physics.joint(j).qposadr[0] for j in JOINTS]
    out = []
    try:
        for pose in poses:
            data.qpos[qpos] = pose
            mujoco.mj_forward(physics, data)
            seg.update_scene(data, camera=camera)
            dep.update_scene(data, camera=camera)
            ids = seg.render()
            geom = (ids[..., 1] == mujoco.mjtObj.mjOBJ_GEOM) & (ids[..., 0] >= 0)
            out.append((np.where(geom, physics.geom_bodyid[np.clip(ids[..., 0], 0, None)], -1), dep.render()))
    finally:
        seg.close()
        dep.close()
    return out


@pytest.mark.parametrize("camera", [AGENTVIEW, WRIST])
def test_every_link_draws_the_silhouette_of_its_full_meshes(models, camera):
    physics, render = models
    data = mujoco.MjData(physics)
    limits = np.array([physics.jnt_range[physics.joint(j).id] for j in JOINTS])
    poses = np.random.default_rng(7).uniform(limits[:, 0], limits[:, 1], (POSES, len(JOINTS)))
    full = link_masks(physics, physics, data, camera, poses)
    fast = link_masks(render, physics, data, camera, poses)
    links = {name: physics.body(name).id for name in LINKS}
    counted = {}
    for name, body in links.items():
        inter = sum(int(((a == body) & (b == body)).sum()) for (a, _), (b, _) in zip(full, fast))
        union = sum(int(((a == body) | (b == body)).sum()) for (a, _), (b, _) in zip(full, fast))
        if union >= MIN_PIXELS:
            counted[name] = inter / union
    arm = list(links.values())
    inter = sum(int((np.isin(a, arm) & np.isin(b, arm)).sum()) for (a, _), (b, _) in zip(full, fast))
    union = sum(int((np.isin(a, arm) | np.isin(b, arm)).sum()) for (a, _), (b, _) in zip(full, fast))
    assert {"gripper", "moving_jaw_so101_v1"} <= set(counted), f"{camera}: the jaws are not in view: {counted}"
    low = {name: round(iou, 4) for name, iou in counted.items() if iou < 0.98}
    assert not low, f"{camera}: links whose silhouette IoU is below 0.98: {low} (all: {counted})"
    assert inter / union >= 0.99, f"{camera}: whole-arm IoU {inter / union:.4f}"
    # Depth where both draw the same link: the decimation tolerance is 0.5 mm; grazing views stretch it.
    same = np.concatenate([(a >= 0) & (a == b) for (a, _), (b, _) in zip(full, fast)])
    diff = np.abs(np.concatenate([d for _, d in full]) - np.concatenate([d for _, d in fast]))[same]
    assert np.median(diff) < 2e-4 and np.percentile(diff, 95) < 1.5e-3, \
        f"{camera}: depth differences median {np.median(diff) * 1e3:.3f} mm, p95 {np.percentile(diff, 95) * 1e3:.3f} mm"


def test_render_model_draws_a_tenth_and_physics_keeps_the_package_meshes(models):
    physics, render = models
    assert drawn_faces(render) < drawn_faces(physics) / 10, (drawn_faces(render), drawn_faces(physics))
    package = mujoco.MjModel.from_xml_path(str(SO101_XML))  # the arm's collision meshes as the package ships them
    for k in range(package.nmesh):
        name = package.mesh(k).name
        assert physics.mesh_facenum[physics.mesh(name).id] == package.mesh_facenum[k], name
    # Same scene (bodies, geoms, cameras); clip planes as the full scene's.
    assert (render.ngeom, render.nbody, render.ncam) == (physics.ngeom, physics.nbody, physics.ncam)
    assert render.stat.extent == physics.stat.extent


def test_generation_is_deterministic_and_cached_by_content_and_settings(models, tmp_path):
    physics, _ = models
    source = mesh_data(physics, physics.mesh("sts3215_03a_v1").id, textured=False)
    first = decimated(source, Decimation(), tmp_path / "a")
    again = decimated(source, Decimation(), tmp_path / "b")
    assert np.array_equal(first.vert, again.vert) and np.array_equal(first.face, again.face)
    assert len(first.face) < len(source.face) / 5
    [cached] = list((tmp_path / "a").iterdir())
    assert cached.suffix == ".npz"
    read = decimated(source, Decimation(), tmp_path / "a")  # from the file
    assert np.array_equal(read.vert, first.vert) and np.array_equal(read.face, first.face)
    decimated(source, Decimation(tolerance=1e-3), tmp_path / "a")
    assert len(list((tmp_path / "a").iterdir())) == 2  # other settings, another file


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="tolerance"):
        Decimation(tolerance=0)
    with pytest.raises(ValueError, match="render_meshes"):
        load_twin_config(overrides={"render_meshes": "coarse"})
