"""Metrics on hand-made graphs, and against a direct set-based transcription of their definitions."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgvla.scene_graph import Graph, aggregate, load_ontology, score_frame
from sgvla.scene_graph.ontology import FAMILIES, INVERSE, RELATIONS, Ontology

ONTOLOGY = load_ontology("libero_spatial")
B1, B2, PLATE, COOKIES, STOVE = "akita_black_bowl_1", "akita_black_bowl_2", "plate_1", "cookies_1", "flat_stove_1"


def g(*triplets):
    return Graph.of(triplets)


REF = g((B1, "is_left_of", PLATE), (PLATE, "is_right_of", B1), (B2, "is_behind", PLATE), (PLATE, "is_in_front_of", B2))


def test_identical_graphs_score_one():
    score = score_frame(REF, REF, ONTOLOGY)
    assert (score.tp, score.fp, score.fn, score.precision, score.recall, score.f1, score.swapped) == (
        4,
        0,
        0,
        1.0,
        1.0,
        1.0,
        False,
    )


@pytest.mark.parametrize(
    ("pred", "ref", "expected"),
    [
        (g(), g(), (1.0, 1.0, 1.0)),  # both empty
        (g(), REF, (0.0, 0.0, 0.0)),  # nothing predicted
        (REF, g(), (0.0, 0.0, 0.0)),  # nothing to find
    ],
)
def test_empty_graphs(pred, ref, expected):
    score = score_frame(pred, ref, ONTOLOGY)
    assert (score.precision, score.recall, score.f1) == expected


def test_bowl_swap_keeps_the_better_assignment():
    swapped = REF.rename({B1: B2, B2: B1})
    score = score_frame(swapped, REF, ONTOLOGY)
    assert score.f1 == 1.0 and score.swapped
    # Half right either way: a tie keeps the prediction as written.
    half = g((B1, "is_left_of", PLATE), (B1, "is_behind", PLATE))
    tie = score_frame(half, REF, ONTOLOGY)
    assert (tie.tp, tie.fp, tie.fn, tie.swapped) == (1, 1, 3, False)


def test_no_swap_without_interchangeable_objects():
    one_bowl = Ontology("one_bowl", ("black_bowl", "white_plate"), "black_bowl")
    ref = g(("black_bowl", "is_left_of", "white_plate"))
    assert not score_frame(ref, ref, one_bowl).swapped


def test_the_so101_tabletop_bowls_swap_as_libero_s_do():
    so101 = load_ontology("so101_tabletop")
    ref = g(("black_bowl_1", "is_left_of", "white_plate"), ("black_bowl_2", "is_right_of", "white_plate"))
    swapped = ref.rename({"black_bowl_1": "black_bowl_2", "black_bowl_2": "black_bowl_1"})
    score = score_frame(swapped, ref, so101)
    assert score.f1 == 1.0 and score.swapped


def test_triplets_outside_the_ontology_are_an_error():
    with pytest.raises(ValueError, match="table_1"):
        score_frame(g(("table_1", "is_left_of", PLATE)), REF, ONTOLOGY)


def test_aggregate_on_hand_made_frames():
    wrong = g((B1, "is_right_of", PLATE), (PLATE, "is_left_of", B1), (COOKIES, "is_on_top_of", STOVE))
    frames = [
        ("t0", REF, REF),  # F1 1
        ("t0", g((B1, "is_left_of", PLATE), (PLATE, "is_right_of", B1)), REF),  # 2 of 4: P 1, R 0.5, F1 2/3
        ("t1", wrong, REF),  # F1 0: two reversals, one hallucination
    ]
    scores = aggregate(frames, ONTOLOGY)
    assert scores.per_task_f1 == pytest.approx({"t0": (1 + 2 / 3) / 2, "t1": 0.0})
    assert scores.mean_task_f1 == pytest.approx(((1 + 2 / 3) / 2 + 0) / 2)
    assert scores.macro_f1 == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert (scores.micro.tp, scores.micro.fp, scores.micro.fn) == (6, 3, 6)
    assert scores.micro.f1 == pytest.approx(12 / 21)
    assert scores.hallucination_rate == pytest.approx(3 / 9)
    assert scores.reversal_rate == pytest.approx(2 / 9)
    # Relation types of the reference: left, right, behind, front. Frame 2 predicts left and right only;
    # frame 3 predicts right, left, on top.
    assert scores.coverage == pytest.approx((4 + 2 + 2) / 12)
    # Each reference holds 2 inverse pairs; frame 1 predicts both, frame 2 one, frame 3 none.
    assert scores.direction_consistency == pytest.approx((2 + 1 + 0) / 6)
    assert scores.per_relation["is_left_of"].recall == pytest.approx(2 / 3)
    assert scores.per_relation["is_on_top_of"].precision == 0.0
    assert scores.per_relation["is_inside"].f1 == 1.0  # never predicted nor expected
    assert scores.per_object_recall == pytest.approx({B1: 4 / 6, B2: 2 / 6, PLATE: 6 / 12})
    assert scores.unidirectional.micro.tp == 3 and scores.unidirectional.micro.fn == 3
    assert set(scores.unidirectional.per_relation) == {"is_left_of", "is_in_front_of", "is_on_top_of", "is_inside"}
    assert scores.to_dict()["per_task_f1"]["t1"] == 0.0


def test_aggregate_needs_frames():
    with pytest.raises(ValueError, match="no frames"):
        aggregate([], ONTOLOGY)


# --- Direct transcription of the definitions, one frame and one triplet at a time. ---


def ratio(num, den, empty):
    return num / den if den else empty


def frame_f1(pred, ref):
    return ratio(2 * len(pred & ref), len(pred) + len(ref), 1.0)


def naive(frames, ontology):
    swap = dict(zip(ontology.interchangeable[0], reversed(ontology.interchangeable[0])))
    tp = fp = fn = covered = n_ref = reversals = n_pred = pairs = consistent = 0
    f1s, by_task = [], {}
    for task, pred, ref in frames:
        pred, ref = set(pred), set(ref)
        swapped = {(swap.get(s, s), r, swap.get(o, o)) for s, r, o in pred}
        if frame_f1(swapped, ref) > frame_f1(pred, ref):
            pred = swapped
        f1s.append(frame_f1(pred, ref))
        by_task.setdefault(task, []).append(frame_f1(pred, ref))
        tp, fp, fn = tp + len(pred & ref), fp + len(pred - ref), fn + len(ref - pred)
        types = {r for _, r, _ in pred}
        covered += sum(r in types for _, r, _ in ref)
        n_ref += len(ref)
        n_pred += len(pred)
        reversals += sum((s, r, o) not in ref and ((o, r, s) in ref or (s, INVERSE[r], o) in ref) for s, r, o in pred)
        for s, r, o in ref:
            if RELATIONS.index(r) % 2 == 0 and (o, INVERSE[r], s) in ref:
                pairs += 1
                consistent += (s, r, o) in pred and (o, INVERSE[r], s) in pred
    return {
        "mean_task_f1": sum(sum(v) / len(v) for v in by_task.values()) / len(by_task),
        "macro_f1": sum(f1s) / len(f1s),
        "micro_f1": ratio(2 * tp, 2 * tp + fp + fn, 1.0),
        "coverage": ratio(covered, n_ref, 1.0),
        "hallucination_rate": ratio(fp, n_pred, 0.0),
        "reversal_rate": ratio(reversals, n_pred, 0.0),
        "direction_consistency": ratio(consistent, pairs, 1.0),
    }


SMALL = ["akita_black_bowl_1", "akita_black_bowl_2", "plate_1", "cookies_1"]
triplet = st.tuples(st.sampled_from(SMALL), st.sampled_from(RELATIONS), st.sampled_from(SMALL))
graph = st.lists(triplet, max_size=12).map(Graph.of)
frames = st.lists(st.tuples(st.integers(0, 2), graph, graph), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(frames)
def test_aggregate_matches_the_definitions(frames):
    fast, slow = aggregate(frames, ONTOLOGY), naive(frames, ONTOLOGY)
    for key in ("mean_task_f1", "macro_f1", "coverage", "hallucination_rate", "reversal_rate", "direction_consistency"):
        assert math.isclose(getattr(fast, key), slow[key], abs_tol=1e-12), key
    assert math.isclose(fast.micro.f1, slow["micro_f1"], abs_tol=1e-12)


@settings(max_examples=100, deadline=None)
@given(graph, graph)
def test_frame_scores_are_symmetric_and_swap_invariant(a, b):
    forward, backward = score_frame(a, b, ONTOLOGY), score_frame(b, a, ONTOLOGY)
    assert math.isclose(forward.f1, backward.f1)
    assert math.isclose(forward.precision, backward.recall) and math.isclose(forward.recall, backward.precision)
    renamed = a.rename({B1: B2, B2: B1})
    assert math.isclose(score_frame(renamed, b, ONTOLOGY).f1, forward.f1)
    assert score_frame(a, a, ONTOLOGY).f1 == 1.0
    scores = aggregate([(0, a, a)], ONTOLOGY)
    assert scores.mean_task_f1 == scores.macro_f1 == scores.micro.f1 == 1.0
    assert scores.hallucination_rate == scores.reversal_rate == 0.0
    assert scores.coverage == scores.direction_consistency == 1.0
    assert scores.unidirectional.micro.f1 == 1.0


@settings(max_examples=100, deadline=None)
@given(graph, graph)
def test_unidirectional_view_collapses_inverse_pairs(a, b):
    def collapse(graph):
        return Graph.of((o, INVERSE[r], s) if FAMILIES[r] != r else (s, r, o) for s, r, o in graph)

    direct = aggregate([(0, collapse(a), collapse(b))], ONTOLOGY)
    assert aggregate([(0, a, b)], ONTOLOGY).unidirectional.micro == direct.micro
