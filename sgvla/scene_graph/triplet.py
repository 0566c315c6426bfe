"""Directed triplets and the immutable graph that holds them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from sgvla.scene_graph.ontology import RELATION_INDEX


class Triplet(NamedTuple):
    subject: str
    relation: str
    object: str


def _order(t: Triplet) -> tuple[str, str, str]:
    return (t.subject, t.object, t.relation)


@dataclass(frozen=True)
class Graph:
    """A set of triplets, deduplicated and sorted by (subject, object, relation).

    That order is the order in which the reference generator emits a ground-truth
    graph (sorted subjects, then sorted objects), so serialized graphs match it.
    """

    triplets: tuple[Triplet, ...] = ()

    def __post_init__(self) -> None:
        items = set()
        for item in self.triplets:
            if len(item) != 3 or not all(isinstance(part, str) for part in item):
                raise ValueError(f"a triplet is three strings (subject, relation, object), got {item!r}")
            if item[1] not in RELATION_INDEX:
                raise ValueError(f"unknown relation {item[1]!r} in {tuple(item)!r}")
            items.add(Triplet(*item))
        object.__setattr__(self, "triplets", tuple(sorted(items, key=_order)))

    @classmethod
    def of(cls, triplets: Iterable[Iterable[str]]) -> Graph:
        return cls(tuple(tuple(t) for t in triplets))  # type: ignore[arg-type]

    @classmethod
    def _trusted(cls, triplets: tuple[Triplet, ...]) -> Graph:
        """Wrap triplets already unique and in graph order (array fast paths)."""
        graph = object.__new__(cls)
        object.__setattr__(graph, "triplets", triplets)
        return graph

    def __iter__(self) -> Iterator[Triplet]:
        return iter(self.triplets)

    def __len__(self) -> int:
        return len(self.triplets)

    def __contains__(self, item: object) -> bool:
        return item in self.triplets

    def filter_subject(self, name: str) -> Graph:
        return Graph._trusted(tuple(t for t in self.triplets if t.subject == name))

    def objects(self) -> tuple[str, ...]:
        """Every object named as subject or object, sorted."""
        return tuple(sorted({t.subject for t in self.triplets} | {t.object for t in self.triplets}))

    def rename(self, mapping: dict[str, str]) -> Graph:
        return Graph(tuple(Triplet(mapping.get(s, s), r, mapping.get(o, o)) for s, r, o in self.triplets))

    def to_json(self) -> str:
        return json.dumps([list(t) for t in self.triplets])

    @classmethod
    def from_json(cls, text: str) -> Graph:
        data = json.loads(text)
        if not isinstance(data, list):
            raise ValueError(f"graph JSON must be a list of [subject, relation, object], got {type(data).__name__}")
        return cls.of(data)
