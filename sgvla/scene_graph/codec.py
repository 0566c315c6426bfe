"""Graphs as arrays: one byte per ordered object pair, one bit per relation.

A frame over N objects is an (N, N) uint8 matrix whose cell [s, o] holds bit k
when ``(objects[s], RELATIONS[k], objects[o])`` is in the graph. Eight relations
fit one byte exactly, and the relation operations the metrics need become cheap
array operations: (o, r, s) is a transpose, (s, inv(r), o) swaps neighbouring
bits, an instance renaming permutes rows and columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import chain

import numpy as np

from sgvla.scene_graph.ontology import RELATIONS
from sgvla.scene_graph.triplet import Graph, Triplet

# Bit k of RELATIONS; index -1 (no relation) maps to the empty mask.
_RELATION_BIT = np.array([1 << k for k in range(len(RELATIONS))] + [0], dtype=np.uint8)
# Each relation bit moved to its inverse's bit: 0 <-> 1, 2 <-> 3, ...
INVERSE_BITS = np.array([((m & 0x55) << 1) | ((m >> 1) & 0x55) for m in range(256)], dtype=np.uint8)
FIRST_OF_PAIR = np.uint8(0x55)
# Graphs order the relations of one pair by name; decoding visits them in that order.
_BY_NAME = np.array(sorted(range(len(RELATIONS)), key=RELATIONS.__getitem__))
_NAME_RANK = np.argsort(_BY_NAME).astype(np.int8)


def relation_masks(relations: np.ndarray) -> np.ndarray:
    """(..., N, N) int8 relation indices (-1 = none) as relation masks."""
    return _RELATION_BIT[relations]


def unique_names(names: Sequence[str]) -> tuple[str, ...]:
    names = tuple(names)
    if len(set(names)) != len(names):
        raise ValueError(f"object names must be unique, got {list(names)}")
    return names


class GraphDecoder:
    """Turns (F, N, N) relation arrays into Graphs without per-triplet Python work.

    Triplet objects are built once per (subject, object, relation) and reused;
    cells are visited in sorted-name order, so each frame's triplets come out
    already in Graph order. Consecutive identical frames (the common case along a
    trajectory) are decoded once and share one Graph.
    """

    def __init__(self, names: Sequence[str]) -> None:
        self.names = unique_names(names)
        self._order = np.array(sorted(range(len(self.names)), key=self.names.__getitem__), dtype=np.intp)
        ordered = [self.names[i] for i in self._order]
        self._table = [Triplet(s, RELATIONS[k], o) for s in ordered for o in ordered for k in _BY_NAME]

    def graphs(self, masks: np.ndarray) -> list[Graph]:
        """Graphs of (F, N, N) relation masks."""
        ordered = self._ordered(np.asarray(masks, dtype=np.uint8), "relation masks")
        return self._decode_runs(ordered, self._from_masks)

    def graphs_from_relations(self, relations: np.ndarray) -> list[Graph]:
        """Graphs of (F, N, N) relation indices (-1 = none), one relation per pair at most."""
        ordered = self._ordered(np.asarray(relations, dtype=np.int8), "relations")
        return self._decode_runs(ordered, self._from_relations)

    def _ordered(self, array: np.ndarray, what: str) -> np.ndarray:
        """Rows and columns in sorted-name order, flattened to (F, N * N)."""
        n = len(self.names)
        if array.ndim != 3 or array.shape[1:] != (n, n):
            raise ValueError(f"{what} must have shape (F, {n}, {n}), got {array.shape}")
        return array[:, self._order][:, :, self._order].reshape(len(array), n * n)

    def _decode_runs(self, ordered: np.ndarray, decode) -> list[Graph]:
        if len(ordered) == 0:
            return []
        new_run = np.ones(len(ordered), dtype=bool)
        new_run[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
        distinct = decode(ordered[new_run])
        return [distinct[k] for k in (np.cumsum(new_run) - 1).tolist()]

    def _from_masks(self, ordered: np.ndarray) -> list[Graph]:
        bits = np.unpackbits(ordered[..., None], axis=-1, bitorder="little")[..., _BY_NAME]
        frame, code = np.nonzero(bits.reshape(len(bits), ordered.shape[1] * len(RELATIONS)))
        return self._assemble(frame, code, len(bits))

    def _from_relations(self, ordered: np.ndarray) -> list[Graph]:
        frame, cell = np.nonzero(ordered >= 0)
        return self._assemble(frame, cell * len(RELATIONS) + _NAME_RANK[ordered[frame, cell]], len(ordered))

    def _assemble(self, frame: np.ndarray, code: np.ndarray, frames: int) -> list[Graph]:
        items = list(map(self._table.__getitem__, code.tolist()))
        ends = np.cumsum(np.bincount(frame, minlength=frames)).tolist()
        return [Graph._trusted(tuple(items[a:b])) for a, b in zip([0, *ends[:-1]], ends)]


@lru_cache(maxsize=64)
def decoder_for(names: tuple[str, ...]) -> GraphDecoder:
    """A shared decoder per object list: building one costs N * N * 8 Triplets."""
    return GraphDecoder(names)


class TripletCodec:
    """Graphs over a fixed object list <-> (F, N, N) relation masks."""

    def __init__(self, objects: Sequence[str]) -> None:
        self.objects = unique_names(objects)
        n = len(self.objects)
        self._code = {
            Triplet(s, r, o): (a * n + b) * len(RELATIONS) + k
            for a, s in enumerate(self.objects)
            for b, o in enumerate(self.objects)
            for k, r in enumerate(RELATIONS)
        }
        self._decoder = GraphDecoder(self.objects)

    def encode(self, graphs: Iterable[Iterable[Triplet]]) -> np.ndarray:
        """Relation masks of the graphs; a triplet outside the object list is a ValueError."""
        graphs = [g.triplets if isinstance(g, Graph) else tuple(g) for g in graphs]
        n, frames = len(self.objects), len(graphs)
        lengths = np.fromiter(map(len, graphs), dtype=np.intp, count=frames)
        flat = list(chain.from_iterable(graphs))
        try:
            codes = np.fromiter(map(self._code.__getitem__, flat), dtype=np.intp, count=len(flat))
        except KeyError as exc:
            raise ValueError(f"triplet {tuple(exc.args[0])} is not over objects {list(self.objects)}") from exc
        except TypeError as exc:
            raise ValueError(f"graphs must hold (subject, relation, object) triplets: {exc}") from exc
        bits = np.zeros((frames, n * n * len(RELATIONS)), dtype=bool)
        bits[np.repeat(np.arange(frames), lengths), codes] = True
        return np.packbits(bits.reshape(frames, n * n, len(RELATIONS)), axis=-1, bitorder="little").reshape(
            frames, n, n
        )

    def decode(self, masks: np.ndarray) -> list[Graph]:
        return self._decoder.graphs(masks)
