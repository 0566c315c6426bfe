"""Exact-triplet scores of predicted graphs against reference graphs (paper, section 5.1).

Per frame, with TP/FP/FN counted on exact (subject, relation, object) matches:

- precision = TP / (TP + FP), recall = TP / (TP + FN), F1 = 2TP / (2TP + FP + FN).
  Both graphs empty: P = R = F1 = 1. Otherwise an empty denominator gives 0, so an
  empty prediction against a non-empty reference, or the reverse, scores 0/0/0.
- Instance invariance: every renaming allowed by the ontology's interchangeable
  groups (swapping the two bowls) is applied to the prediction, and the renaming
  with the most TP (hence the highest F1) is kept; the identity wins ties. All
  other scores use the prediction under the kept renaming.

Over frames tagged with a task id:

- ``mean_task_f1`` (the paper's main score): mean over tasks of the mean frame F1 of the task.
- ``macro_f1``: mean frame F1. ``micro``: P/R/F1 of TP/FP/FN pooled over frames.
- ``coverage``: fraction of reference triplets whose relation appears somewhere in
  the same frame's prediction (1 when there are no reference triplets).
- ``hallucination_rate``: pooled FP / (TP + FP) (0 when nothing is predicted).
- ``reversal_rate``: fraction of predicted triplets that are reversals: (s, r, o)
  is wrong, but the reference holds the same pair in the opposite direction,
  i.e. (o, r, s) or (s, inv(r), o) is in the reference (0 when nothing is predicted).
- ``direction_consistency``: of the reference's inverse pairs, (A r B) and
  (B inv(r) A) both in the reference, the fraction whose two triplets are both
  predicted (1 when the reference has no such pair).
- ``per_relation``: pooled P/R/F1 of the triplets with that relation (same empty rules).
- ``per_object_recall``: pooled recall of the reference triplets that name the
  object as subject or object; objects never named by a reference are left out.
- ``unidirectional``: all of the above after collapsing inverse pairs into the four
  families: (s, r, o) with r the second relation of its pair becomes (o, inv(r), s),
  duplicates merge, then the same scoring (renaming chosen anew) runs.

Ratios are pooled over all frames. Graphs are encoded as relation masks
(:mod:`sgvla.scene_graph.codec`), so scoring 100k+ frames is a handful of array operations.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import lru_cache

import numpy as np

from sgvla.scene_graph.codec import FIRST_OF_PAIR, INVERSE_BITS, TripletCodec
from sgvla.scene_graph.ontology import RELATION_INDEX, RELATIONS, Ontology
from sgvla.scene_graph.triplet import Graph, Triplet


def _ratio(num: int, den: int, empty: float) -> float:
    return num / den if den else empty


@dataclass(frozen=True)
class PRF:
    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    f1: float

    @classmethod
    def from_counts(cls, tp: int, fp: int, fn: int) -> PRF:
        nothing = 1.0 if tp + fp + fn == 0 else 0.0
        return cls(
            tp,
            fp,
            fn,
            precision=_ratio(tp, tp + fp, nothing),
            recall=_ratio(tp, tp + fn, nothing),
            f1=_ratio(2 * tp, 2 * tp + fp + fn, 1.0),
        )


@dataclass(frozen=True)
class FrameScore:
    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    f1: float
    swapped: bool


@dataclass(frozen=True)
class BenchmarkScores:
    n_frames: int
    mean_task_f1: float
    macro_f1: float
    micro: PRF
    per_task_f1: dict[Hashable, float]
    coverage: float
    hallucination_rate: float
    reversal_rate: float
    direction_consistency: float
    per_relation: dict[str, PRF]
    per_object_recall: dict[str, float]
    swapped_frames: int
    unidirectional: BenchmarkScores | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["per_task_f1"] = {str(k): v for k, v in self.per_task_f1.items()}
        return data


@lru_cache(maxsize=16)
def _codec(ontology: Ontology) -> tuple[TripletCodec, tuple[np.ndarray, ...]]:
    """The ontology's codec, and for each allowed renaming the index array that applies it."""
    index = {name: i for i, name in enumerate(ontology.objects)}
    renamings = []
    for mapping in ontology.assignments():
        source = {new: old for old, new in mapping.items()}
        renamings.append(np.array([index[source.get(name, name)] for name in ontology.objects]))
    return TripletCodec(ontology.objects), tuple(renamings)


def encode(graphs: Iterable[Iterable[Triplet]], ontology: Ontology) -> np.ndarray:
    """(F, N, N) relation masks of graphs over the ontology's objects (see :mod:`codec`)."""
    return _codec(ontology)[0].encode(graphs)


def _count(masks: np.ndarray) -> np.ndarray:
    """Triplets per frame."""
    return np.bitwise_count(masks).sum(axis=(1, 2), dtype=np.int64)


def _partner(masks: np.ndarray) -> np.ndarray:
    """(s, r, o) -> (o, inv(r), s): the same fact written the other way round."""
    return INVERSE_BITS[masks.transpose(0, 2, 1)]


def _choose_renaming(pred: np.ndarray, ref: np.ndarray, ontology: Ontology) -> tuple[np.ndarray, np.ndarray]:
    """The prediction under its best renaming, and which renaming (0 = identity) won."""
    renamings = _codec(ontology)[1]
    if len(renamings) == 1:
        return pred, np.zeros(len(pred), dtype=np.intp)
    candidates = [pred[:, perm][:, :, perm] for perm in renamings]
    choice = np.stack([_count(c & ref) for c in candidates], axis=1).argmax(axis=1)
    chosen = candidates[0].copy()
    for k in range(1, len(candidates)):
        rows = choice == k
        chosen[rows] = candidates[k][rows]
    return chosen, choice


def score_frame(pred: Graph, ref: Graph, ontology: Ontology) -> FrameScore:
    """Exact-triplet P/R/F1 of one frame under the best instance renaming."""
    pred_masks, ref_masks = encode([pred], ontology), encode([ref], ontology)
    chosen, choice = _choose_renaming(pred_masks, ref_masks, ontology)
    tp = int(_count(chosen & ref_masks)[0])
    prf = PRF.from_counts(tp, int(_count(chosen)[0]) - tp, int(_count(ref_masks)[0]) - tp)
    return FrameScore(prf.tp, prf.fp, prf.fn, prf.precision, prf.recall, prf.f1, bool(choice[0]))


def aggregate(frames: Iterable[tuple[Hashable, Graph, Graph]], ontology: Ontology) -> BenchmarkScores:
    """Benchmark scores of ``(task_id, prediction, reference)`` frames."""
    frames = list(frames)
    tasks = [task for task, _, _ in frames]
    pred = encode([p for _, p, _ in frames], ontology)
    ref = encode([r for _, _, r in frames], ontology)
    return aggregate_encoded(tasks, pred, ref, ontology)


def aggregate_encoded(
    tasks: Sequence[Hashable], pred: np.ndarray, ref: np.ndarray, ontology: Ontology
) -> BenchmarkScores:
    """:func:`aggregate` on relation masks from :func:`encode`."""
    n = len(ontology.objects)
    if len(tasks) == 0:
        raise ValueError("no frames to score")
    pred, ref = np.asarray(pred, dtype=np.uint8), np.asarray(ref, dtype=np.uint8)
    if pred.shape != (len(tasks), n, n) or ref.shape != pred.shape:
        raise ValueError(f"pred {pred.shape} and ref {ref.shape} must both be ({len(tasks)}, {n}, {n})")
    scores = _score(tasks, pred, ref, ontology, RELATIONS)
    pred_u = (pred | _partner(pred)) & FIRST_OF_PAIR
    ref_u = (ref | _partner(ref)) & FIRST_OF_PAIR
    unidirectional = _score(tasks, pred_u, ref_u, ontology, RELATIONS[::2])
    return replace(scores, unidirectional=unidirectional)


def _relation_counts(masks: np.ndarray) -> np.ndarray:
    """Triplets of each relation over all frames: (8,)."""
    bits = np.unpackbits(masks.reshape(-1, 1), axis=1, bitorder="little")
    return bits.sum(axis=0, dtype=np.int64)


def _score(
    tasks: Sequence[Hashable], pred: np.ndarray, ref: np.ndarray, ontology: Ontology, relations: Sequence[str]
) -> BenchmarkScores:
    chosen, choice = _choose_renaming(pred, ref, ontology)
    hit = chosen & ref
    tp, n_pred, n_ref = _count(hit), _count(chosen), _count(ref)
    both = n_pred + n_ref
    frame_f1 = np.where(both > 0, 2 * tp / np.maximum(both, 1), 1.0)

    task_keys = sorted(set(tasks), key=str)
    task_index = {task: i for i, task in enumerate(task_keys)}
    task_of = np.fromiter((task_index[t] for t in tasks), dtype=np.intp, count=len(tasks))
    task_f1 = np.bincount(task_of, weights=frame_f1) / np.bincount(task_of)

    total_tp, total_pred, total_ref = int(tp.sum()), int(n_pred.sum()), int(n_ref.sum())
    present = np.bitwise_or.reduce(chosen.reshape(len(chosen), -1), axis=1)
    covered = int(_count(ref & present[:, None, None]).sum())
    opposite = ref.transpose(0, 2, 1) | INVERSE_BITS[ref]
    reversals = int(_count(chosen & ~ref & opposite).sum())
    pairs = ref & _partner(ref) & FIRST_OF_PAIR
    consistent = int(_count(pairs & chosen & _partner(chosen)).sum())

    hit_r, pred_r, ref_r = (_relation_counts(m) for m in (hit, chosen, ref))
    per_relation = {}
    for name in relations:
        k = RELATION_INDEX[name]
        t = int(hit_r[k])
        per_relation[name] = PRF.from_counts(t, int(pred_r[k]) - t, int(ref_r[k]) - t)
    ref_cells = np.bitwise_count(ref).sum(axis=0, dtype=np.int64)
    hit_cells = np.bitwise_count(hit).sum(axis=0, dtype=np.int64)
    per_object = {}
    for i, name in enumerate(ontology.objects):
        support = int(ref_cells[i].sum() + ref_cells[:, i].sum() - ref_cells[i, i])
        if support:
            found = int(hit_cells[i].sum() + hit_cells[:, i].sum() - hit_cells[i, i])
            per_object[name] = found / support

    return BenchmarkScores(
        n_frames=len(tasks),
        mean_task_f1=float(task_f1.mean()),
        macro_f1=float(frame_f1.mean()),
        micro=PRF.from_counts(total_tp, total_pred - total_tp, total_ref - total_tp),
        per_task_f1={task: float(task_f1[i]) for i, task in enumerate(task_keys)},
        coverage=_ratio(covered, total_ref, 1.0),
        hallucination_rate=_ratio(total_pred - total_tp, total_pred, 0.0),
        reversal_rate=_ratio(reversals, total_pred, 0.0),
        direction_consistency=_ratio(consistent, int(_count(pairs).sum()), 1.0),
        per_relation=per_relation,
        per_object_recall=per_object,
        swapped_frames=int((choice > 0).sum()),
    )
