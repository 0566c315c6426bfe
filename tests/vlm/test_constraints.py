"""The grammar and schema accept exactly triplets over the vocabulary."""

import json

import pytest

from sgvla.scene_graph import RELATIONS, load_ontology, parse_triplets
from sgvla.vlm.constraints import full_graph_json, full_graph_tokens, make_constraint, triplet_grammar, triplet_schema

OBJECTS = load_ontology("libero_spatial").objects


@pytest.fixture(scope="module")
def matcher_for(tiny_backend):
    import xgrammar as xgr

    def make(kind):
        return lambda: xgr.GrammarMatcher(tiny_backend._compiled(make_constraint(kind, OBJECTS, RELATIONS)))
    return make


def accepts(matcher, text: str) -> bool:
    return matcher.accept_string(text)


def test_grammar_accepts_triplet_lines_only(matcher_for):
    make = matcher_for("grammar")
    assert accepts(make(), "(plate_1, is_left_of, cookies_1)\n(cookies_1, contains, plate_1)\n")
    assert not accepts(make(), "(plate, is_left_of, cookies_1)\n")
    assert not accepts(make(), "(plate_1, is_near, cookies_1)\n")
    assert not accepts(make(), "Sure! (plate_1, is_left_of, cookies_1)\n")


def test_schema_accepts_enum_triplets_only(matcher_for):
    make = matcher_for("json_schema")
    good = {"triplets": [{"subject": "plate_1", "relation": "is_behind", "object": "flat_stove_1"}]}
    assert accepts(make(), json.dumps(good))
    bad = {"triplets": [{"subject": "stove", "relation": "is_behind", "object": "flat_stove_1"}]}
    assert not accepts(make(), json.dumps(bad))
    # What the schema lets through, the parser reads.
    assert list(parse_triplets(json.dumps(good), load_ontology("libero_spatial")).triplets) == [
        ("plate_1", "is_behind", "flat_stove_1")]


def test_spec_texts():
    assert '"akita_black_bowl_1" | "akita_black_bowl_2"' in triplet_grammar(OBJECTS, RELATIONS)
    schema = triplet_schema(OBJECTS, RELATIONS)
    assert schema["properties"]["triplets"]["items"]["properties"]["relation"]["enum"] == list(RELATIONS)
    assert make_constraint("none", OBJECTS, RELATIONS) is None
    with pytest.raises(ValueError, match="unknown constraint"):
        make_constraint("regex", OBJECTS, RELATIONS)


def test_a_full_graph_fits_the_budget_computed_for_it(matcher_for):
    """The worst full graph (every ordered pair, the longest relation) is a valid constrained answer of
    n(n-1) triplets; its byte count bounds its tokens for any byte-level tokenizer."""
    ontology = load_ontology("libero_spatial")
    text = full_graph_json(OBJECTS)
    assert accepts(matcher_for("json_schema")(), text)
    assert len(parse_triplets(text, ontology).triplets) == 7 * 6 == 42
    assert full_graph_tokens(OBJECTS) == len(text.encode()) + 1 == 3897
    assert full_graph_tokens(load_ontology("so101_tabletop").objects) == 2465  # 6 objects: 30 triplets
