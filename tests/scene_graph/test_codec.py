import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgvla.scene_graph import Graph, GraphDecoder, Triplet, TripletCodec, relation_masks
from sgvla.scene_graph.ontology import RELATIONS

OBJECTS = ("plate_1", "akita_black_bowl_2", "cookies_1")


def test_graph_is_sorted_by_subject_object_relation_and_deduplicated():
    graph = Graph.of(
        [
            ("plate_1", "is_left_of", "cookies_1"),
            ("akita_black_bowl_2", "is_behind", "plate_1"),
            ("plate_1", "is_behind", "akita_black_bowl_2"),
            ("plate_1", "is_left_of", "cookies_1"),
        ]
    )
    assert graph.triplets == (
        Triplet("akita_black_bowl_2", "is_behind", "plate_1"),
        Triplet("plate_1", "is_behind", "akita_black_bowl_2"),
        Triplet("plate_1", "is_left_of", "cookies_1"),
    )
    assert graph.objects() == ("akita_black_bowl_2", "cookies_1", "plate_1")
    assert graph.filter_subject("plate_1") == Graph.of(graph.triplets[1:])
    assert ("plate_1", "is_left_of", "cookies_1") in graph and len(graph) == 3
    assert Graph.from_json(graph.to_json()) == graph


def test_graph_rejects_malformed_triplets():
    with pytest.raises(ValueError, match="unknown relation 'next_to'"):
        Graph.of([("a", "next_to", "b")])
    with pytest.raises(ValueError, match="three strings"):
        Graph.of([("a", "is_left_of")])
    with pytest.raises(ValueError, match="list of"):
        Graph.from_json('{"a": 1}')


triplets = st.lists(
    st.tuples(st.sampled_from(OBJECTS), st.sampled_from(RELATIONS), st.sampled_from(OBJECTS)), max_size=20
)


@settings(max_examples=100, deadline=None)
@given(st.lists(triplets, max_size=5))
def test_encode_decode_round_trip(graphs):
    graphs = [Graph.of(t) for t in graphs]
    codec = TripletCodec(OBJECTS)
    masks = codec.encode(graphs)
    assert masks.shape == (len(graphs), 3, 3) and masks.dtype == np.uint8
    assert codec.decode(masks) == graphs


def test_relation_index_arrays_decode_like_masks():
    relations = np.array([[[-1, 0, 7], [3, -1, -1], [-1, 5, -1]]], dtype=np.int8)
    decoder = GraphDecoder(OBJECTS)
    assert decoder.graphs_from_relations(relations) == decoder.graphs(relation_masks(relations))
    assert decoder.graphs_from_relations(relations)[0] == Graph.of(
        [
            ("plate_1", "is_left_of", "akita_black_bowl_2"),
            ("plate_1", "contains", "cookies_1"),
            ("akita_black_bowl_2", "is_behind", "plate_1"),
            ("cookies_1", "is_below_of", "akita_black_bowl_2"),
        ]
    )
    with pytest.raises(ValueError, match=r"shape \(F, 3, 3\)"):
        decoder.graphs(np.zeros((1, 2, 2), np.uint8))


def test_encoding_unknown_objects_is_an_error():
    with pytest.raises(ValueError, match="not over objects"):
        TripletCodec(OBJECTS).encode([[("plate_1", "is_left_of", "stove_1")]])


def test_repeated_frames_decode_like_distinct_ones():
    a = Graph.of([("plate_1", "is_left_of", "cookies_1")])
    b = Graph.of([("cookies_1", "is_right_of", "plate_1"), ("cookies_1", "is_behind", "plate_1")])
    graphs = [a, a, b, a, Graph(), Graph(), b]
    codec = TripletCodec(OBJECTS)
    assert codec.decode(codec.encode(graphs)) == graphs
    assert codec.decode(np.zeros((0, 3, 3), np.uint8)) == []
