"""What parsing drops from a VLM answer, by reason (`ParseResult.dropped_by_reason`): the counts every graph source
and vlm-bench report."""

import json

from sgvla.scene_graph import load_ontology
from sgvla.scene_graph.parse import DROP_REASONS, TRUNCATED, parse_triplets

ONTOLOGY = load_ontology("libero_spatial")
VALID = "(akita_black_bowl_1, is_left_of, plate_1)"


def test_each_dropped_entry_is_counted_under_its_reason():
    answer = "\n".join([VALID, "(black_bowl_1, is_floating_over, plate_1)", "(unicorn_1, is_on, plate_1)",
                        "(plate_1, is_on_top_of, plate_1)", "a, b"])
    parsed = parse_triplets(answer, ONTOLOGY)
    assert parsed.n_lines == 5 and len(parsed.triplets) == 1
    assert parsed.dropped_by_reason() == {"unknown relation": 1, "unknown object": 1, "subject equals object": 1,
                                          "not a triplet": 1}
    assert set(parsed.dropped_by_reason()) <= set(DROP_REASONS)


def test_the_entry_a_cut_broke_counts_as_truncated():
    text = f"{VALID}\n(unicorn_1, is_on, plate_1)\n(plate_1, is_right_of, akita_bl"  # cut inside the last line
    parsed = parse_triplets(text, ONTOLOGY)
    assert parsed.dropped_by_reason() == {"unknown object": 2}  # not known to be cut: both are its answer
    assert parsed.dropped_by_reason(truncated=True) == {"unknown object": 1, TRUNCATED: 1}
    complete = parse_triplets(f"{VALID}\n(unicorn_1, is_on, plate_1)\n{VALID}", ONTOLOGY)
    assert complete.dropped_by_reason(truncated=True) == {"unknown object": 1}  # its last entry is a triplet

    items = [{"subject": "plate_1", "relation": "is_right_of", "object": "akita_black_bowl_1"},
             {"subject": "plate_1", "relation": "is_left_of", "object": "cookies_1"}]
    cut_json = parse_triplets(json.dumps({"triplets": items})[:-5], ONTOLOGY)  # the second element is cut off
    assert cut_json.cut and len(cut_json.triplets) == 1
    assert cut_json.dropped_by_reason(truncated=True) == {TRUNCATED: 1}
