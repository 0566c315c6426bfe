"""The fast profile draws decimated meshes: every object and the robot keep their silhouettes, images stay close to
the full meshes', and the reference profile (what learned policies saw) draws the package's meshes untouched.

The full-mesh backend here draws the full textures too, while fast draws its 2D textures at most 4 texels per image
pixel (512x512 at 128 px, for memory: sgvla.sim.render_textures); the closeness bounds hold for both changes."""

import dataclasses

import mujoco
import numpy as np
import pytest

from sgvla.sim.render_meshes import drawn_faces

pytestmark = pytest.mark.sim

SIZE = 128  # LIBERO's dataset images


def owners(backend) -> np.ndarray:
    """Per geom: the object column it belongs to, len(objects) for the robot (and gripper), -1 for the rest."""
    model = backend.sim.model._model
    index = backend.env.index
    owner = np.full(model.ngeom, -1)
    owner[index.geom_ids] = index.geom_object
    for g in range(model.ngeom):
        body = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, model.geom_bodyid[g]) or ""
        if body.startswith(("robot0", "gripper0")):
            owner[g] = len(index.names)
    return owner


def masks(renderer, backend, camera, owner) -> np.ndarray:
    renderer.update_scene(backend.sim.data._data, camera=camera)
    ids = renderer.render()
    geom = (ids[..., 1] == mujoco.mjtObj.mjOBJ_GEOM) & (ids[..., 0] >= 0)
    return np.where(geom, owner[np.clip(ids[..., 0], 0, None)], -1)


def test_fast_profile_keeps_every_silhouette(backends):
    backend = backends(0, image_size=SIZE)
    backend.reset(0)
    render = backend.sim._render_context_offscreen.render_model
    physics = backend.sim.model._model
    assert drawn_faces(render, (0, 1)) < drawn_faces(physics, (0, 1)) / 3
    owner = owners(backend)
    names = [*backend.env.index.names, "robot"]
    inter, union = np.zeros(len(names)), np.zeros(len(names))
    rng = np.random.default_rng(0)
    renderers = [mujoco.Renderer(model, SIZE, SIZE) for model in (physics, render)]
    try:
        for renderer in renderers:
            renderer.enable_segmentation_rendering()
        for seed in range(2):
            backend.reset(seed)
            for _ in range(4):
                backend.step(np.r_[rng.uniform(-0.5, 0.5, 6), -1.0])
                for camera in backend.cameras:
                    full, fast = (masks(r, backend, camera, owner) for r in renderers)
                    for k in range(len(names)):
                        inter[k] += ((full == k) & (fast == k)).sum()
                        union[k] += ((full == k) | (fast == k)).sum()
    finally:
        for renderer in renderers:
            renderer.close()
    seen = union >= 200
    iou = dict(zip(np.array(names)[seen], np.round(inter[seen] / union[seen], 4)))
    assert seen.sum() >= 6 and "robot" in iou, iou
    assert min(iou.values()) >= 0.98, iou


def test_fast_images_close_to_full_meshes_and_reference_untouched(backends):
    fast = backends(1, image_size=SIZE)
    full = backends(1, image_size=SIZE, lean_step=False)  # another backend, whose renderer gets the full meshes
    full.env.profile = dataclasses.replace(full.env.profile, decimated_meshes=False)
    a, b = fast.reset(3).images, full.reset(3).images
    for camera in fast.cameras:
        diff = np.abs(a[camera].astype(int) - b[camera].astype(int))
        assert diff.mean() < 3.0 and (diff.max(axis=2) > 40).mean() < 0.03, (camera, diff.mean())
    reference = backends(1, image_size=SIZE, render_profile="reference")
    reference.reset(3)
    assert getattr(reference.sim._render_context_offscreen, "render_model", None) is None
