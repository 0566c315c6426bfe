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

Ratios are pooled over all frames. Triplets are encoded as integers so that the
scoring of 100k+ frames is a handful of array operations.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from itertools import chain

import numpy as np

from sgvla.scene_graph.ontology import RELATION_INDEX, RELATIONS, Ontology
from sgvla.scene_graph.triplet import Graph, Triplet

_R = len(RELATIONS)


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
            tp, fp, fn,
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


class TripletCodec:
    """Integer codes of the triplets over an ontology: ``(s * N + o) * 8 + r``.

    Also holds the code permutations the metrics need: instance renamings, the
    reversal (s, r, o) -> (o, r, s), the inverse (s, r, o) -> (s, inv r, o) and the
    partner (s, r, o) -> (o, inv r, s).
    """

    def __init__(self, ontology: Ontology) -> None:
        objects = ontology.objects
        n = len(objects)
        index = {name: i for i, name in enumerate(objects)}
        self.objects = objects
        self.size = n * n * _R
        codes = np.arange(self.size)
        s, o, r = codes // (n * _R), (codes // _R) % n, codes % _R
        self.relation = r
        self.subject = s
        self.object = o
        self.reverse = (o * n + s) * _R + r
        self.inverse = (s * n + o) * _R + (r ^ 1)
        self.partner = (o * n + s) * _R + (r ^ 1)
        renamings = []
        for mapping in ontology.assignments():
            perm = np.array([index[mapping.get(name, name)] for name in objects])
            renamings.append((perm[s] * n + perm[o]) * _R + r)
        self.renamings = np.stack(renamings)
        self._code = {
            Triplet(objects[a], RELATIONS[k], objects[b]): (a * n + b) * _R + k
            for a in range(n) for b in range(n) for k in range(_R)
        }

    def encode(self, graphs: Sequence[Iterable[Triplet]]) -> np.ndarray:
        """(F, size) bool membership matrix; a triplet outside the ontology is a ValueError."""
        graphs = [g.triplets if isinstance(g, Graph) else tuple(g) for g in graphs]
        lengths = np.fromiter(map(len, graphs), dtype=np.intp, count=len(graphs))
        flat = list(chain.from_iterable(graphs))
        try:
            cols = np.fromiter(map(self._code.__getitem__, flat), dtype=np.intp, count=len(flat))
        except KeyError as exc:
            raise ValueError(f"triplet {tuple(exc.args[0])} is not over objects {list(self.objects)}") from exc
        except TypeError as exc:
            raise ValueError(f"graphs must hold (subject, relation, object) triplets: {exc}") from exc
        rows = np.repeat(np.arange(len(graphs)), lengths)
        member = np.zeros((len(graphs), self.size), dtype=bool)
        member[rows, cols] = True
        return member


@lru_cache(maxsize=16)
def codec_for(ontology: Ontology) -> TripletCodec:
    return TripletCodec(ontology)


def _by_relation(bits: np.ndarray) -> np.ndarray:
    """View (F, size) codes as (F, pairs, relation)."""
    return bits.reshape(len(bits), -1, _R)


def _choose_renaming(pred: np.ndarray, ref: np.ndarray, codec: TripletCodec) -> tuple[np.ndarray, np.ndarray]:
    """The prediction under its best renaming, and which renaming (0 = identity) won."""
    if len(codec.renamings) == 1:
        return pred, np.zeros(len(pred), dtype=np.intp)
    candidates = [pred[:, perm_inverse] for perm_inverse in np.argsort(codec.renamings, axis=1)]
    tp = np.stack([(c & ref).sum(axis=1) for c in candidates], axis=1)
    choice = tp.argmax(axis=1)
    chosen = candidates[0].copy()
    for k in range(1, len(candidates)):
        rows = choice == k
        chosen[rows] = candidates[k][rows]
    return chosen, choice


def score_frame(pred: Graph, ref: Graph, ontology: Ontology) -> FrameScore:
    """Exact-triplet P/R/F1 of one frame under the best instance renaming."""
    codec = codec_for(ontology)
    pred_bits, ref_bits = codec.encode([pred]), codec.encode([ref])
    chosen, choice = _choose_renaming(pred_bits, ref_bits, codec)
    tp = int((chosen & ref_bits).sum())
    prf = PRF.from_counts(tp, int(chosen.sum()) - tp, int(ref_bits.sum()) - tp)
    return FrameScore(prf.tp, prf.fp, prf.fn, prf.precision, prf.recall, prf.f1, bool(choice[0]))


def aggregate(frames: Iterable[tuple[Hashable, Graph, Graph]], ontology: Ontology) -> BenchmarkScores:
    """Benchmark scores of ``(task_id, prediction, reference)`` frames."""
    frames = list(frames)
    codec = codec_for(ontology)
    tasks = [task for task, _, _ in frames]
    pred = codec.encode([p for _, p, _ in frames])
    ref = codec.encode([r for _, _, r in frames])
    return aggregate_encoded(tasks, pred, ref, codec)


def aggregate_encoded(
    tasks: Sequence[Hashable], pred: np.ndarray, ref: np.ndarray, codec: TripletCodec
) -> BenchmarkScores:
    """:func:`aggregate` on matrices from :meth:`TripletCodec.encode`."""
    if len(tasks) == 0:
        raise ValueError("no frames to score")
    if pred.shape != ref.shape or pred.shape != (len(tasks), codec.size):
        raise ValueError(f"pred {pred.shape} and ref {ref.shape} must both be ({len(tasks)}, {codec.size})")
    scores = _score(tasks, pred, ref, codec, RELATIONS)
    first = codec.relation % 2 == 0
    pred_u = (pred | pred[:, codec.partner]) & first
    ref_u = (ref | ref[:, codec.partner]) & first
    unidirectional = _score(tasks, pred_u, ref_u, codec, RELATIONS[::2])
    return replace(scores, unidirectional=unidirectional)


def _score(
    tasks: Sequence[Hashable], pred: np.ndarray, ref: np.ndarray, codec: TripletCodec, relations: Sequence[str]
) -> BenchmarkScores:
    chosen, choice = _choose_renaming(pred, ref, codec)
    hit = chosen & ref
    tp = hit.sum(axis=1)
    n_pred = chosen.sum(axis=1)
    n_ref = ref.sum(axis=1)
    both = n_pred + n_ref
    frame_f1 = np.where(both > 0, 2 * tp / np.maximum(both, 1), 1.0)

    task_keys = sorted(set(tasks), key=str)
    task_index = {task: i for i, task in enumerate(task_keys)}
    task_of = np.fromiter((task_index[t] for t in tasks), dtype=np.intp, count=len(tasks))
    task_f1 = np.bincount(task_of, weights=frame_f1) / np.bincount(task_of)
    per_task = {task: float(task_f1[i]) for i, task in enumerate(task_keys)}

    TP, P, REF = int(tp.sum()), int(n_pred.sum()), int(n_ref.sum())
    frames = len(tasks)
    present = _by_relation(chosen).any(axis=1)
    covered = int((_by_relation(ref) & present[:, None, :]).sum())
    wrong = chosen & ~ref
    reversals = int((wrong & (ref[:, codec.reverse] | ref[:, codec.inverse])).sum())
    pairs = ref & ref[:, codec.partner] & (codec.relation % 2 == 0)
    consistent = int((pairs & chosen & chosen[:, codec.partner]).sum())

    hit_r, pred_r, ref_r = (_by_relation(b).sum(axis=(0, 1)) for b in (hit, chosen, ref))
    per_relation = {}
    for name in relations:
        k = RELATION_INDEX[name]
        t = int(hit_r[k])
        per_relation[name] = PRF.from_counts(t, int(pred_r[k]) - t, int(ref_r[k]) - t)
    ref_code, hit_code = ref.sum(axis=0), hit.sum(axis=0)
    per_object = {}
    for i, name in enumerate(codec.objects):
        involved = (codec.subject == i) | (codec.object == i)
        support = int(ref_code[involved].sum())
        if support:
            per_object[name] = int(hit_code[involved].sum()) / support

    return BenchmarkScores(
        n_frames=frames,
        mean_task_f1=float(task_f1.mean()),
        macro_f1=float(frame_f1.mean()),
        micro=PRF.from_counts(TP, P - TP, REF - TP),
        per_task_f1=per_task,
        coverage=_ratio(covered, REF, 1.0),
        hallucination_rate=_ratio(P - TP, P, 0.0),
        reversal_rate=_ratio(reversals, P, 0.0),
        direction_consistency=_ratio(consistent, int(pairs.sum()), 1.0),
        per_relation=per_relation,
        per_object_recall=per_object,
        swapped_frames=int((choice > 0).sum()),
    )

