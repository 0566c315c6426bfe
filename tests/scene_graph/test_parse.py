import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from sgvla.scene_graph import Graph, load_ontology, parse_triplets
from sgvla.scene_graph.ontology import RELATIONS
from sgvla.scene_graph.parse import resolve_relation

ONTOLOGY = load_ontology("libero_spatial")
CORPUS = yaml.safe_load((Path(__file__).parents[1] / "data" / "vlm_answers.yaml").read_text())


@pytest.mark.parametrize("case", CORPUS, ids=[case["name"] for case in CORPUS])
def test_realistic_answers(case):
    ontology = load_ontology(case.get("ontology", "libero_spatial"))
    result = parse_triplets(case["answer"], ontology)
    assert result.triplets == Graph.of(case["expected"])
    assert result.reason_counts() == case["rejected"]
    assert result.n_lines >= len(result.triplets) + len(result.rejected)


@pytest.mark.parametrize(
    ("phrase", "relation"),
    [
        ("left of", "is_left_of"),
        ("is left of", "is_left_of"),
        ("LEFT_OF", "is_left_of"),
        ("to the left of", "is_left_of"),
        ("is_right_of", "is_right_of"),
        ("in front of", "is_in_front_of"),
        ("behind", "is_behind"),
        ("on top of", "is_on_top_of"),
        ("on", "is_on_top_of"),
        ("above", "is_on_top_of"),
        ("below", "is_below_of"),
        ("under", "is_below_of"),
        ("inside", "is_inside"),
        ("in", "is_inside"),
        ("contains", "contains"),
        ("next to", None),
        ("near", None),
        ("", None),
    ],
)
def test_relation_synonyms(phrase, relation):
    assert resolve_relation(phrase) == relation


def test_each_relation_round_trips():
    for relation in RELATIONS:
        text = f"(plate_1, {relation}, cookies_1)"
        assert parse_triplets(text, ONTOLOGY).triplets == Graph.of([("plate_1", relation, "cookies_1")])


def test_duplicates_collapse():
    result = parse_triplets("(plate, left of, stove)\n(plate_1, is_left_of, flat_stove_1)", ONTOLOGY)
    assert len(result.triplets) == 1 and result.n_lines == 2 and not result.rejected


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=400) | st.text(alphabet="()[]{},;|:`'\"<>/_- \n\tabcplateonbowl1234", max_size=400))
def test_never_raises_and_only_returns_valid_triplets(text):
    result = parse_triplets(text, ONTOLOGY)
    for subject, relation, obj in result.triplets:
        assert subject in ONTOLOGY.objects and obj in ONTOLOGY.objects and subject != obj
        assert relation in RELATIONS
    assert result.n_lines >= len(result.rejected)


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
        max_leaves=20,
    )
)
def test_never_raises_on_json(value):
    import json

    parse_triplets(json.dumps(value), ONTOLOGY)


def test_pathological_inputs():
    for text in [
        "[" * 5000,
        "{" * 5000 + "}" * 5000,
        "(" * 3000,
        "1" * 10000,
        "a " * 5000,
        "<think>",
        "</think>",
        None,
        42,
    ]:
        parse_triplets(text, ONTOLOGY)  # type: ignore[arg-type]


def test_a_json_answer_cut_at_the_token_limit_keeps_its_complete_triplets():
    triplets = [("plate_1", "is_left_of", "cookies_1"), ("akita_black_bowl_1", "is_on_top_of", "plate_1"),
                ("flat_stove_1", "is_behind", "plate_1")]
    answer = json.dumps({"triplets": [{"subject": s, "relation": r, "object": o} for s, r, o in triplets]})
    whole = parse_triplets(answer, ONTOLOGY)
    assert len(whole.triplets) == 3 and not whole.cut
    cut = parse_triplets(answer[:-5], ONTOLOGY)  # 5 characters short: inside the third object's name
    assert cut.triplets == Graph.of(triplets[:2]) and cut.cut and not cut.rejected
    lists = json.dumps([list(t) for t in triplets])
    assert parse_triplets("```json\n" + lists[:-9], ONTOLOGY).triplets == Graph.of(triplets[:2])
    lines = "\n".join(json.dumps({"subject": s, "relation": r, "object": o}) for s, r, o in triplets)
    assert parse_triplets(lines[:-5], ONTOLOGY).triplets == Graph.of(triplets[:2])  # JSON lines: line by line


def test_an_explicitly_empty_json_answer_is_an_empty_graph():
    for text in ('{"triplets": []}', "[]", '```json\n{"triplets": []}\n```'):
        result = parse_triplets(text, ONTOLOGY)
        assert result.empty and not result.triplets and not result.rejected and not result.cut
    assert not parse_triplets("no relations", ONTOLOGY).empty
