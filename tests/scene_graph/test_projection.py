"""Hand-made projection cases. Camera at the world origin, OpenCV axes equal to world axes
(looking along +z, image x along +x, image rows down along +y), fx = fy = 100, centre (64, 64),
128 x 128 image: a point (x, y, z) lands on u = 100 x / z + 64, v = 128 - (100 y / z + 64)."""

import numpy as np
import pytest

from sgvla.scene_graph import Camera, GeomBatch, ObjectGeoms, RelationParams, project_boxes, project_boxes_batch

K = np.array([[100.0, 0.0, 64.0], [0.0, 100.0, 64.0], [0.0, 0.0, 1.0]])
EYE = np.eye(4)
CAMERA = Camera("front", K, EYE, 128, 128)


def cube(center, half, rotation=np.eye(3)) -> ObjectGeoms:
    return ObjectGeoms(np.array([center], float), np.array([rotation], float), np.array([half], float))


def box_of(*objects: ObjectGeoms, camera: Camera = CAMERA, params: RelationParams = RelationParams()):
    boxes, visible = project_boxes(list(objects), camera, params)
    return [tuple(int(c) for c in b) if v else None for b, v in zip(boxes, visible)]


def test_cube_in_front_of_the_camera():
    # Corners x, y in [-0.1, 0.1] at z in [0.9, 1.1]: u and v in [52.89, 75.11] -> 52..75, padded by 5.
    assert box_of(cube([0, 0, 1], [0.1, 0.1, 0.1])) == [(52 - 5, 52 - 5, 75 + 5, 75 + 5)]


def test_rows_count_from_the_bottom():
    # Camera y points down; v = H - (fy y / z + cy), so a point lower in the camera image
    # (larger y) gets a smaller row.
    below = box_of(cube([0, 0.3, 1], [0.01, 0.01, 0.01]))[0]
    above = box_of(cube([0, -0.3, 1], [0.01, 0.01, 0.01]))[0]
    # y in [0.29, 0.31], z in [0.99, 1.01]: v in [32.69, 35.29] -> rows 32..35, padded by 5.
    assert (below[1], below[3]) == (27, 40)
    assert below[1] < above[1]


def test_pixels_truncate_toward_zero_then_pad():
    # u spans [-20, -0.5]: truncation toward zero gives max u = 0 (floor would give -1), so x2 = 5.
    box = box_of(cube([-0.7425, 0, 1], [0.0975, 0.01, 0.0]))[0]
    assert box is not None and box[0] == 0 and box[2] == 5


def test_rotation_is_applied():
    tall = box_of(cube([0, 0, 1], [0.01, 0.2, 0.0001]))[0]
    rotated = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    wide = box_of(cube([0, 0, 1], [0.01, 0.2, 0.0001], rotated))[0]
    assert tall[2] - tall[0] < tall[3] - tall[1]
    assert wide[2] - wide[0] > wide[3] - wide[1]


def test_corners_at_or_behind_min_depth_are_dropped():
    # A thin slab from z = -1 to z = 3: only the far corners project.
    partly = box_of(cube([0, 0, 1], [0.1, 0.1, 2.0]))[0]
    far_only = box_of(cube([0, 0, 3], [0.1, 0.1, 0.0]))[0]
    assert partly == far_only
    assert box_of(cube([0, 0, -1], [0.1, 0.1, 0.1])) == [None]
    # Exactly at min_depth is dropped (strict >); just beyond is kept.
    assert box_of(cube([0, 0, 0.01], [0.0001, 0.0001, 0.0])) == [None]
    assert box_of(cube([0, 0, 0.0101], [0.00001, 0.00001, 0.0])) != [None]


def test_off_image_boxes_are_not_visible():
    # u = 100 * 0.9 / 1 + 64 = 154 > 128 + pad: clamped to x1 = 149, x2 = 128 -> empty.
    assert box_of(cube([0.9, 0, 1], [0.01, 0.01, 0.01])) == [None]
    # Just off the image (u = 129.9..130.1) but within the padding: a thin box from 124 to 128.
    assert box_of(cube([0.66, 0, 1], [0.001, 0.001, 0.001]))[0][::2] == (124, 128)


def test_oversize_boxes_are_discarded():
    params = RelationParams(pad_px=0)
    # Width 3 * 128 = 384 px exactly: kept (the test is strictly wider than 3 W).
    kept = box_of(cube([0, 0, 1], [1.92, 0.01, 0.0]), params=params)[0]
    assert kept == (0, 63, 128, 65)
    assert box_of(cube([0, 0, 1], [1.93, 0.01, 0.0]), params=params) == [None]
    assert box_of(cube([0, 0, 1], [0.01, 1.93, 0.0]), params=params) == [None]


def test_an_object_is_the_union_of_its_geoms():
    a = cube([-0.2, 0, 1], [0.01, 0.01, 0.0])
    b = cube([0.2, 0.1, 1], [0.01, 0.01, 0.0])
    both = ObjectGeoms(
        np.concatenate([a.centers, b.centers]),
        np.concatenate([a.rotations, b.rotations]),
        np.concatenate([a.half_sizes, b.half_sizes]),
    )
    box_a, box_b = box_of(a)[0], box_of(b)[0]
    assert box_of(both)[0] == (*map(min, box_a[:2], box_b[:2]), *map(max, box_a[2:], box_b[2:]))


def test_object_without_geoms_is_not_visible():
    empty = ObjectGeoms(np.zeros((0, 3)), np.zeros((0, 3, 3)), np.zeros((0, 3)))
    assert box_of(empty, cube([0, 0, 1], [0.1, 0.1, 0.1]))[0] is None
    assert box_of(empty) == [None]


def test_moving_camera_has_one_pose_per_frame():
    shifted = EYE.copy()
    shifted[0, 3] = 0.2  # camera moved +0.2 along x: the object appears 20 px further left
    camera = Camera("wrist", K, np.stack([EYE, shifted]), 128, 128)
    geoms = GeomBatch(
        np.array([0]), np.array([[[0, 0, 1.0]]] * 2), np.array([[np.eye(3)]] * 2), np.array([[0.01, 0.01, 0]]), 1
    )
    boxes, visible = project_boxes_batch(geoms, camera)
    assert visible.all()
    assert boxes[0, 0, 0] - boxes[1, 0, 0] == 20
    with pytest.raises(ValueError, match="2 poses for 1 frames"):
        project_boxes_batch(
            GeomBatch(np.array([0]), geoms.centers[:1], geoms.rotations[:1], geoms.half_sizes, 1), camera
        )


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="K must be 3x3"):
        Camera("c", np.eye(4), EYE, 128, 128)
    with pytest.raises(ValueError, match="cam_to_world"):
        Camera("c", K, np.eye(3), 128, 128)
    with pytest.raises(ValueError, match="rotations must have shape"):
        ObjectGeoms(np.zeros((2, 3)), np.zeros((1, 3, 3)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="geom_object values"):
        GeomBatch(np.array([3]), np.zeros((1, 1, 3)), np.zeros((1, 1, 3, 3)), np.zeros((1, 3)), 2)
