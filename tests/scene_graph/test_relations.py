"""Every branch of the ground-truth relation rule, on hand-made boxes and positions."""

import numpy as np
import pytest

from sgvla.scene_graph import Graph, RelationParams, assign_relations, assign_relations_batch
from sgvla.scene_graph.ontology import RELATIONS
from sgvla.scene_graph.relations import is_drawer_task

PICK = "pick up the black bowl next to the plate and place it on the plate"
DRAWER = "pick up the black bowl in the top drawer of the wooden cabinet and place it on the plate"
APART = ([0, 0, 10, 10], [50, 50, 60, 60])


def pair(a, b, pos_a, pos_b, box_a=APART[0], box_b=APART[1], task=PICK, params=RelationParams()):
    graph = assign_relations(
        [a, b], np.array([pos_a, pos_b], float), np.array([box_a, box_b]), np.array([True, True]), task, params
    )
    return {(s, o): r for s, r, o in graph}


@pytest.mark.parametrize(
    ("pos_a", "forward", "backward"),
    [
        ((1.0, 0.0, 0.0), "is_in_front_of", "is_behind"),  # dx > 0
        ((-1.0, 0.0, 0.0), "is_behind", "is_in_front_of"),  # dx < 0
        ((0.0, 1.0, 0.0), "is_left_of", "is_right_of"),  # dy > 0
        ((0.0, -1.0, 0.0), "is_right_of", "is_left_of"),  # dy < 0
        ((0.5, 0.5, 0.0), "is_in_front_of", "is_behind"),  # |dx| == |dy|: depth wins
        ((0.5, -0.5, 9.0), "is_in_front_of", "is_behind"),  # z plays no part without overlap
        ((0.2, -0.6, 0.0), "is_right_of", "is_left_of"),
    ],
)
def test_horizontal_relations_follow_the_dominant_world_axis(pos_a, forward, backward):
    relations = pair("plate_1", "cookies_1", pos_a, (0, 0, 0))
    assert relations == {("plate_1", "cookies_1"): forward, ("cookies_1", "plate_1"): backward}


def test_same_horizontal_position_is_behind_both_ways():
    # dx = dy = 0: |dx| >= |dy| and dx > 0 fails, so the literal rule says "is_behind" both ways.
    assert set(pair("plate_1", "cookies_1", (0, 0, 1), (0, 0, 0)).values()) == {"is_behind"}


@pytest.mark.parametrize(
    ("box_b", "stacked"),
    [
        ([2, 0, 12, 10], False),  # overlap 80 / 100 = 0.8 exactly: not above the threshold
        ([1, 0, 11, 10], True),  # 0.9
        ([0, 0, 100, 100], True),  # A inside B: overlap / min area = 1
        ([10, 0, 20, 10], False),  # touching edges: no intersection
        ([5, 5, 5, 20], False),  # degenerate
    ],
)
def test_overlap_threshold(box_b, stacked):
    relations = pair("akita_black_bowl_1", "plate_1", (0.3, 0, 1.0), (0, 0, 0.9), [0, 0, 10, 10], box_b)
    expected = ("is_on_top_of", "is_below_of") if stacked else ("is_in_front_of", "is_behind")
    assert (relations[("akita_black_bowl_1", "plate_1")], relations[("plate_1", "akita_black_bowl_1")]) == expected


def test_threshold_is_a_parameter():
    params = RelationParams(overlap_threshold=0.85)
    relations = pair(
        "akita_black_bowl_1", "plate_1", (0.3, 0, 1), (0, 0, 0.9), [0, 0, 10, 10], [1, 0, 11, 10], params=params
    )
    assert relations[("akita_black_bowl_1", "plate_1")] == "is_on_top_of"
    relations = pair(
        "akita_black_bowl_1", "plate_1", (0.3, 0, 1), (0, 0, 0.9), [0, 0, 10, 10], [2, 0, 12, 10], params=params
    )
    assert relations[("akita_black_bowl_1", "plate_1")] == "is_in_front_of"


def test_vertical_needs_a_bowl_in_the_pair():
    overlapping = ([0, 0, 10, 10], [0, 0, 10, 10])
    no_bowl = pair("plate_1", "cookies_1", (0, 0.1, 1), (0, 0, 0), *overlapping)
    assert no_bowl[("plate_1", "cookies_1")] == "is_left_of"
    bowl_as_object = pair("plate_1", "akita_black_bowl_2", (0, 0.1, 1), (0, 0, 0), *overlapping)
    assert bowl_as_object == {
        ("plate_1", "akita_black_bowl_2"): "is_on_top_of",
        ("akita_black_bowl_2", "plate_1"): "is_below_of",
    }
    keyword = pair(
        "plate_1", "cookies_1", (0, 0.1, 1), (0, 0, 0), *overlapping, params=RelationParams(vertical_keyword="plate")
    )
    assert keyword[("plate_1", "cookies_1")] == "is_on_top_of"


def test_vertical_tie_puts_both_on_top():
    relations = pair("akita_black_bowl_1", "plate_1", (0, 0, 1), (0.3, 0, 1), [0, 0, 10, 10], [0, 0, 10, 10])
    assert set(relations.values()) == {"is_on_top_of"}


@pytest.mark.parametrize(
    ("task", "bowl_z", "expected"),
    [
        (DRAWER, 1.0, ("is_inside", "contains")),  # bowl higher: bowl is_inside cabinet
        (DRAWER, 0.5, ("contains", "is_inside")),  # literal z test: the lower one "contains"
        (DRAWER.replace(" ", "_"), 1.0, ("is_inside", "contains")),  # LIBERO task ids use underscores
        (DRAWER.upper(), 1.0, ("is_inside", "contains")),
        (PICK, 1.0, ("is_on_top_of", "is_below_of")),  # not the drawer task
    ],
)
def test_drawer_rule(task, bowl_z, expected):
    relations = pair(
        "akita_black_bowl_1", "wooden_cabinet_1", (0, 0, bowl_z), (0, 0.1, 0.8), [0, 0, 10, 10], [0, 0, 30, 30], task
    )
    assert (
        relations[("akita_black_bowl_1", "wooden_cabinet_1")],
        relations[("wooden_cabinet_1", "akita_black_bowl_1")],
    ) == expected


def test_drawer_rule_only_for_its_pair():
    relations = pair(
        "akita_black_bowl_2", "wooden_cabinet_1", (0, 0, 1), (0, 0.1, 0.8), [0, 0, 10, 10], [0, 0, 30, 30], DRAWER
    )
    assert relations[("akita_black_bowl_2", "wooden_cabinet_1")] == "is_on_top_of"
    params = RelationParams(drawer_pair=("akita_black_bowl_2", "wooden_cabinet_1"))
    relations = pair(
        "akita_black_bowl_2",
        "wooden_cabinet_1",
        (0, 0, 1),
        (0, 0.1, 0.8),
        [0, 0, 10, 10],
        [0, 0, 30, 30],
        DRAWER,
        params,
    )
    assert relations[("akita_black_bowl_2", "wooden_cabinet_1")] == "is_inside"


def test_drawer_marker():
    params = RelationParams()
    assert is_drawer_task("open the top drawer", RelationParams(drawer_task_marker="top drawer"))
    assert is_drawer_task("pick_up_the_black_bowl_in_the_top_drawer_of_the_wooden_cabinet", params)
    assert not is_drawer_task("pick up the bowl on the cabinet", params)


def test_only_visible_objects_take_part():
    names = ["plate_1", "cookies_1", "flat_stove_1"]
    positions = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], float)
    boxes = np.array([[0, 0, 5, 5], [10, 10, 20, 20], [0, 0, 0, 0]])
    graph = assign_relations(names, positions, boxes, np.array([True, True, False]), PICK)
    assert graph == Graph.of([("cookies_1", "is_in_front_of", "plate_1"), ("plate_1", "is_behind", "cookies_1")])
    assert assign_relations(names, positions, boxes, np.array([True, False, False]), PICK) == Graph()
    assert assign_relations([], np.zeros((0, 3)), np.zeros((0, 4)), np.zeros(0, bool), PICK) == Graph()


def test_batch_is_an_index_array_with_minus_one_for_no_relation():
    names = ["plate_1", "cookies_1"]
    positions = np.array([[[0, 0, 0], [1, 0, 0]], [[0, 0, 0], [0, 1, 0]]], float)
    boxes = np.array([[[0, 0, 5, 5], [10, 10, 20, 20]]] * 2)
    relations = assign_relations_batch(names, positions, boxes, np.ones((2, 2), bool), PICK)
    assert relations.dtype == np.int8 and relations.shape == (2, 2, 2)
    assert (np.diagonal(relations, axis1=1, axis2=2) == -1).all()
    assert RELATIONS[relations[0, 0, 1]] == "is_behind" and RELATIONS[relations[1, 0, 1]] == "is_right_of"


def test_bad_shapes_and_names_are_rejected():
    with pytest.raises(ValueError, match="unique"):
        assign_relations(["a", "a"], np.zeros((2, 3)), np.zeros((2, 4)), np.ones(2, bool), PICK)
    with pytest.raises(ValueError, match=r"positions must have shape \(2, 3\)"):
        assign_relations(["a", "b"], np.zeros((3, 2)), np.zeros((2, 4)), np.ones(2, bool), PICK)
    with pytest.raises(ValueError, match="boxes must have shape"):
        assign_relations_batch(["a", "b"], np.zeros((1, 2, 3)), np.zeros((1, 2, 3)), np.ones((1, 2), bool), PICK)
