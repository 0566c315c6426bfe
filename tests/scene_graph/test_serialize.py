import json

import pytest

from sgvla.scene_graph import Graph, compose_prompt, format_prompt_context, load_ontology, triplet_lines

ONTOLOGY = load_ontology("libero_spatial")
TASK = "pick up the black bowl between the plate and the ramekin and place it on the plate"
GRAPH = Graph.of(
    [
        ("akita_black_bowl_1", "is_left_of", "plate_1"),
        ("akita_black_bowl_1", "is_behind", "glazed_rim_porcelain_ramekin_1"),
        ("akita_black_bowl_1", "is_right_of", "akita_black_bowl_2"),
        ("plate_1", "is_right_of", "akita_black_bowl_1"),
        ("akita_black_bowl_2", "is_left_of", "akita_black_bowl_1"),
    ]
)


def test_reference_block_is_subject_filtered_with_target_prefix():
    context = format_prompt_context(GRAPH, "agentview", ONTOLOGY)
    assert context == (
        "Current simulator semantic context:\n"
        "Scene graph:\n"
        "View: agentview\n"
        "(target_akita_black_bowl, is_right_of, akita_black_bowl)\n"
        "(target_akita_black_bowl, is_behind, glazed_rim_porcelain_ramekin)\n"
        "(target_akita_black_bowl, is_left_of, plate)"
    )
    assert compose_prompt(TASK, context) == f"{TASK}\n{context}"


def test_full_graph_marks_only_the_manipulated_object():
    lines = format_prompt_context(GRAPH, "agentview", ONTOLOGY, subject_filter=None).splitlines()[3:]
    assert lines == [
        "(target_akita_black_bowl, is_right_of, akita_black_bowl)",
        "(target_akita_black_bowl, is_behind, glazed_rim_porcelain_ramekin)",
        "(target_akita_black_bowl, is_left_of, plate)",
        "(akita_black_bowl, is_left_of, target_akita_black_bowl)",
        "(plate, is_right_of, target_akita_black_bowl)",
    ]


def test_other_subject_and_empty_graphs():
    lines = format_prompt_context(GRAPH, "robot0_eye_in_hand", ONTOLOGY, subject_filter="plate_1").splitlines()
    assert lines[2:] == ["View: robot0_eye_in_hand", "(plate, is_right_of, target_akita_black_bowl)"]
    assert format_prompt_context(Graph(), "agentview", ONTOLOGY).endswith("View: agentview\n(none)")
    assert format_prompt_context(Graph(), "agentview", ONTOLOGY, style="compact").endswith(
        "Scene graph (agentview): none"
    )


def test_lines_that_read_the_same_are_written_once():
    two_instances = load_ontology("libero_spatial")
    graph = Graph.of([("plate_1", "is_left_of", "cookies_1"), ("plate_1", "is_left_of", "cookies_1")])
    assert (
        format_prompt_context(graph, "v", two_instances, subject_filter=None).count("(plate, is_left_of, cookies)") == 1
    )


def test_bounding_boxes_block():
    boxes = {"plate_1": [10, 20, 30, 40], "akita_black_bowl_1": (1, 2, 3, 4)}
    context = format_prompt_context(
        GRAPH.filter_subject("plate_1"), "agentview", ONTOLOGY, subject_filter=None, boxes=boxes
    )
    assert context.split("\n\n")[1] == (
        "Bounding boxes:\nView: agentview\ntarget_akita_black_bowl: [1, 2, 3, 4]\nplate: [10, 20, 30, 40]"
    )


def test_compact_and_json_styles():
    compact = format_prompt_context(GRAPH, "agentview", ONTOLOGY, style="compact", boxes={"plate_1": [1, 2, 3, 4]})
    assert compact.splitlines() == [
        "Current simulator semantic context:",
        "Scene graph (agentview): target_akita_black_bowl is_right_of akita_black_bowl; "
        "target_akita_black_bowl is_behind glazed_rim_porcelain_ramekin; target_akita_black_bowl is_left_of plate",
        "Bounding boxes (agentview): plate [1, 2, 3, 4]",
    ]
    header, body = format_prompt_context(GRAPH, "agentview", ONTOLOGY, style="json").split("\n")
    assert header == "Current simulator semantic context:"
    assert json.loads(body) == {
        "view": "agentview",
        "scene_graph": [
            ["target_akita_black_bowl", "is_right_of", "akita_black_bowl"],
            ["target_akita_black_bowl", "is_behind", "glazed_rim_porcelain_ramekin"],
            ["target_akita_black_bowl", "is_left_of", "plate"],
        ],
    }


def test_triplet_lines_keep_ontology_names():
    assert triplet_lines(GRAPH)[0] == "(akita_black_bowl_1, is_right_of, akita_black_bowl_2)"


def test_unknown_style():
    with pytest.raises(ValueError, match="unknown context style 'yaml'"):
        format_prompt_context(GRAPH, "agentview", ONTOLOGY, style="yaml")
