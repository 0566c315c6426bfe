"""The marker geometry of a scene graph (sgvla.nodegraph.markers, no ROS): a box and a label per object, an arrow per
triplet from its subject to its object with the relation at its middle, the target and place highlighted, arrows that
never lie on top of each other, ids stable from one graph to the next."""

import numpy as np
import pytest

from sgvla.core.state import ground_truth_views, object_aabbs
from sgvla.nodegraph.markers import (ARROW, CUBE, OBJECT_COLOR, PLACE_COLOR, TARGET_COLOR, TEXT, ObjectBox,
                                     oriented_box, quaternion_xyzw, scene_boxes, scene_markers, stable_ids)

BOXES = [ObjectBox("bowl_1", (0.0, 0.0, 0.03), (0.04, 0.04, 0.03)),
         ObjectBox("plate_1", (0.3, 0.0, 0.01), (0.08, 0.08, 0.01)),
         ObjectBox("stove_1", (0.0, 0.3, 0.05), (0.1, 0.1, 0.05))]
GRAPH = [("bowl_1", "is_left_of", "plate_1"), ("plate_1", "is_right_of", "bowl_1"),
         ("bowl_1", "is_in_front_of", "plate_1"), ("stove_1", "is_behind", "bowl_1")]


def by_ns(markers, ns):
    return [m for m in markers if m.ns == ns]


def test_one_box_and_label_per_object_the_target_and_place_highlighted():
    out = scene_markers(BOXES, {"agentview": GRAPH}, target="bowl_1", place="plate_1")
    cubes, labels = by_ns(out.markers, "objects"), by_ns(out.markers, "object_labels")
    assert [m.kind for m in cubes] == [CUBE] * 3 and [m.kind for m in labels] == [TEXT] * 3
    color = {m.position: m.color for m in cubes}
    assert color[(0.0, 0.0, 0.03)] == TARGET_COLOR and color[(0.3, 0.0, 0.01)] == PLACE_COLOR
    assert color[(0.0, 0.3, 0.05)] == OBJECT_COLOR
    assert {m.scale for m in cubes} == {(0.08, 0.08, 0.06), (0.16, 0.16, 0.02), (0.2, 0.2, 0.1)}  # full sizes
    text = {m.text: m for m in labels}
    assert set(text) == {"bowl_1 (target)", "plate_1 (place)", "stove_1"}
    assert text["bowl_1 (target)"].scale[2] > text["stove_1"].scale[2]  # the target's label is larger
    assert text["stove_1"].position[2] > 0.1  # above the stove's top (z 0.1)


def test_an_arrow_per_triplet_from_subject_to_object_with_its_relation_at_the_middle():
    out = scene_markers(BOXES, {"agentview": GRAPH}, target="bowl_1")
    arrows, labels = by_ns(out.markers, "relations/agentview"), by_ns(out.markers, "relation_labels/agentview")
    assert len(arrows) == len(labels) == len(GRAPH) and {m.kind for m in arrows} == {ARROW}
    assert sorted(m.text for m in labels) == sorted(r for _, r, _ in GRAPH)
    centre = {b.name: np.array(b.center) for b in BOXES}
    for arrow, label in zip(arrows, labels):
        start, end = (np.array(p) for p in arrow.points)
        # from the subject to the object: the ends lie above the two boxes (shifted sideways by millimetres)
        subject = min(centre, key=lambda n: np.linalg.norm(centre[n][:2] - start[:2]))
        obj = min(centre, key=lambda n: np.linalg.norm(centre[n][:2] - end[:2]))
        assert (subject, label.text, obj) in GRAPH
        assert np.allclose(label.position[:2], ((start + end) / 2)[:2]) and label.position[2] > (start + end)[2] / 2
    thick = {m.scale[0] for m in arrows}
    assert len(thick) == 1  # every triplet here touches the target bowl: all drawn thicker than the plain shaft
    plain = scene_markers(BOXES, {"agentview": GRAPH}, target="nothing")
    assert max(m.scale[0] for m in by_ns(plain.markers, "relations/agentview")) < thick.pop()


def test_arrows_never_coincide():
    """Inverse triplets run side by side; a second relation of the same pair and a second camera's graph higher."""
    out = scene_markers(BOXES, {"agentview": GRAPH, "wrist": GRAPH[:1]}, target="bowl_1")
    arrows = [m for m in out.markers if m.kind == ARROW]
    assert len(arrows) == 5
    assert len({m.points for m in arrows}) == 5
    wrist = by_ns(out.markers, "relations/wrist")[0]
    agent = [m for m in by_ns(out.markers, "relations/agentview") if m.points[0][:2] == wrist.points[0][:2]]
    assert wrist.points[0][2] > max(m.points[0][2] for m in agent)  # its own band, above agentview's
    assert wrist.color != agent[0].color


def test_ids_are_stable_and_unique_and_bad_triplets_are_reported():
    first = scene_markers(BOXES, {"agentview": GRAPH}, target="bowl_1")
    second = scene_markers(BOXES[::-1], {"agentview": GRAPH[::-1] + [("bowl_1", "is_on_top_of", "table_1")]},
                           target="bowl_1")
    assert {m.key for m in first.markers} == {m.key for m in second.markers}  # order of input does not matter
    assert len({m.key for m in first.markers}) == len(first.markers)
    assert second.skipped == [("agentview", "bowl_1", "is_on_top_of", "table_1")]
    fewer = scene_markers(BOXES, {"agentview": GRAPH[1:]}, target="bowl_1")
    gone = "bowl_1 is_left_of plate_1"  # GRAPH[0]: its arrow and label go, nothing else changes its id
    assert {m.key for m in first.markers} - {m.key for m in fewer.markers} == {
        (ns, stable_ids(ns, [gone])[gone]) for ns in ("relations/agentview", "relation_labels/agentview")}
    assert {m.key for m in fewer.markers} <= {m.key for m in first.markers}
    ids = stable_ids("x", [str(i) for i in range(2000)])
    assert len(set(ids.values())) == 2000 and all(0 <= i < 2**31 for i in ids.values())
    assert scene_markers(BOXES, {}, prefix="fiducial/").markers[0].ns == "fiducial/objects"


@pytest.mark.parametrize("angle", [0.0, 0.7, np.pi, -2.5])
def test_oriented_boxes_and_quaternions(angle):
    c, s = np.cos(angle), np.sin(angle)
    r = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    box = oriented_box("cookie", (0.1, 0.2, 0.0), r, (0.05, 0.02, 0.03))
    assert np.allclose(box.center, (0.1, 0.2, 0.03))  # the pose is the middle of the box's base
    assert np.isclose(box.top[2], 0.06)
    x, y, z, w = quaternion_xyzw(r.reshape(-1))
    assert np.isclose(abs(z), abs(np.sin(angle / 2))) and np.isclose(abs(w), abs(np.cos(angle / 2)))
    assert np.isclose(x, 0.0) and np.isclose(y, 0.0) and w >= 0
    flip = np.diag([1.0, -1.0, -1.0])  # 180 degrees about x
    assert np.allclose(quaternion_xyzw(flip.reshape(-1)), (1.0, 0.0, 0.0, 0.0))


def test_a_scenes_boxes_are_its_objects_bounding_boxes():
    from tests.ros.test_messages import scene

    s = scene()
    boxes = scene_boxes(s)
    centers, halves = object_aabbs(s)
    assert [b.name for b in boxes] == list(s.objects)
    assert np.allclose([b.center for b in boxes], centers) and np.allclose([b.half_size for b in boxes], halves)
    graphs = {c: vg.graph for c, vg in ground_truth_views(s).items()}
    out = scene_markers(boxes, graphs, target="akita_black_bowl_1")
    assert len(by_ns(out.markers, "relations/agentview")) == len(graphs["agentview"]) > 0 and not out.skipped
