"""Invariants of ground-truth generation on random scenes, and the array path against a
one-object-at-a-time transcription of the reference projection."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sgvla.scene_graph import Camera, GeomBatch, RelationParams, assign_relations_batch, project_boxes_batch
from sgvla.scene_graph.ontology import INVERSE, RELATIONS

NAMES = ["akita_black_bowl_1", "akita_black_bowl_2", "cookies_1", "plate_1", "wooden_cabinet_1"]
DRAWER = "pick up the black bowl in the top drawer of the wooden cabinet and place it on the plate"
coordinate = st.sampled_from([0.0, 0.1, -0.1, 0.25]) | st.floats(-1, 1, allow_nan=False)


@st.composite
def scenes(draw):
    n = len(NAMES)
    positions = draw(hnp.arrays(np.float64, (n, 3), elements=coordinate))
    corners = draw(hnp.arrays(np.int64, (n, 2), elements=st.integers(0, 60)))
    sizes = draw(hnp.arrays(np.int64, (n, 2), elements=st.integers(1, 40)))
    boxes = np.concatenate([corners, corners + sizes], axis=1)
    visible = draw(hnp.arrays(bool, n))
    task = draw(st.sampled_from([DRAWER, "pick up the black bowl on the stove"]))
    return positions, boxes, visible, task


@settings(max_examples=300, deadline=None)
@given(scenes())
def test_every_visible_pair_has_one_relation_and_the_reverse_pair_its_inverse(scene):
    positions, boxes, visible, task = scene
    relations = assign_relations_batch(NAMES, positions[None], boxes[None], visible[None], task)[0]
    n = len(NAMES)
    for a in range(n):
        for b in range(n):
            both = visible[a] and visible[b] and a != b
            assert (relations[a, b] >= 0) == both
            if not both:
                continue
            forward, backward = RELATIONS[relations[a, b]], RELATIONS[relations[b, a]]
            if forward == backward:
                # The only exceptions to inversion are the ties of the literal rule.
                same_z = positions[a, 2] == positions[b, 2]
                same_xy = (positions[a, :2] == positions[b, :2]).all()
                assert (forward in ("is_on_top_of", "is_inside") and same_z) or (forward == "is_behind" and same_xy)
            else:
                assert backward == INVERSE[forward]


@settings(max_examples=100, deadline=None)
@given(st.lists(scenes(), min_size=1, max_size=5))
def test_batch_equals_frame_by_frame(scene_list):
    positions, boxes, visible = (np.stack([s[i] for s in scene_list]) for i in range(3))
    task = scene_list[0][3]
    batch = assign_relations_batch(NAMES, positions, boxes, visible, task)
    for f in range(len(scene_list)):
        single = assign_relations_batch(NAMES, positions[f : f + 1], boxes[f : f + 1], visible[f : f + 1], task)
        assert (batch[f] == single[0]).all()


# --- Projection against the reference arithmetic, one object at a time. ---

SIGNS = np.array([(sx, sy, sz) for sx in (-1.0, 1.0) for sy in (-1.0, 1.0) for sz in (-1.0, 1.0)])


def reference_box(centers, rotations, sizes, world_to_cam, K, h, w, params):
    local = sizes[:, None, :] * SIGNS[None]
    world = (centers[:, None, :] + np.einsum("gij,gkj->gki", rotations, local)).reshape(-1, 3)
    cam = np.concatenate([world, np.ones((len(world), 1))], axis=1) @ world_to_cam.T
    cam = cam[cam[:, 2] > params.min_depth]
    if cam.size == 0:
        return None
    us = (K[0, 0] * cam[:, 0] / cam[:, 2] + K[0, 2]).astype(np.int64)
    vs = (h - (K[1, 1] * cam[:, 1] / cam[:, 2] + K[1, 2])).astype(np.int64)
    pad = params.pad_px
    rx1, ry1, rx2, ry2 = int(us.min()) - pad, int(vs.min()) - pad, int(us.max()) + pad, int(vs.max()) + pad
    if rx2 - rx1 > w * params.max_box_scale or ry2 - ry1 > h * params.max_box_scale:
        return None
    x1, y1, x2, y2 = max(0, rx1), max(0, ry1), min(w, rx2), min(h, ry2)
    return (x1, y1, x2, y2) if x1 < x2 and y1 < y2 else None


def random_rotations(rng, count):
    q, r = np.linalg.qr(rng.normal(size=(count, 3, 3)))
    return q * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 4), st.sampled_from([64, 128, 256]))
def test_projection_matches_the_reference_arithmetic(seed, n_objects, frames, size):
    rng = np.random.default_rng(seed)
    geom_object = rng.integers(0, n_objects, rng.integers(0, 4 * n_objects + 1))
    g = len(geom_object)
    centers = rng.normal(0, 0.6, (frames, g, 3)) + [0, 0, 1.0]
    rotations = random_rotations(rng, frames * g).reshape(frames, g, 3, 3)
    half = rng.uniform(0.001, 0.3, (g, 3))
    K = np.array([[size, 0, size / 2], [0, size * 1.1, size / 2 + 3], [0, 0, 1.0]])
    poses = np.tile(np.eye(4), (frames, 1, 1))
    # Half the cameras face the scene (along +z), half point anywhere.
    poses[:, :3, :3] = np.eye(3) if seed % 2 else random_rotations(rng, frames)
    poses[:, :3, 3] = rng.normal(0, 0.3, (frames, 3))
    camera = Camera("cam", K, poses, size, size)
    params = RelationParams(pad_px=int(rng.integers(0, 8)))
    boxes, visible = project_boxes_batch(GeomBatch(geom_object, centers, rotations, half, n_objects), camera, params)
    for f in range(frames):
        inverse = np.linalg.inv(poses[f])
        for i in range(n_objects):
            mine = np.flatnonzero(geom_object == i)
            expected = (
                None
                if not len(mine)
                else reference_box(centers[f, mine], rotations[f, mine], half[mine], inverse, K, size, size, params)
            )
            assert (tuple(boxes[f, i]) if visible[f, i] else None) == expected
