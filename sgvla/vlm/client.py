"""The one interface to a VLM: images + task + vocabulary + relations -> raw text -> triplets.

A backend (local transformers model or OpenAI-compatible server) turns chat requests into
completions; :class:`SceneGraphVLM` renders the versioned prompt, applies the configured output
constraint, times the call and parses the answer with the scene-graph core. Backends never raise
for one bad request: the failure is recorded on its completion (`GraphAnswer.failure`), and whoever asked treats
it as an infrastructure failure, never as an empty graph (the graph source fails its episode; vlm-bench leaves
the frame unscored).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from sgvla.scene_graph.ontology import RELATIONS, Ontology
from sgvla.scene_graph.parse import ParseResult, parse_triplets
from sgvla.vlm.constraints import Constraint, make_constraint
from sgvla.vlm.prompts import PromptTemplate


@dataclass(frozen=True)
class ChatRequest:
    images: tuple[np.ndarray, ...]  # (H, W, 3) uint8, upright
    system: str
    user: str
    constraint: Constraint | None = None
    max_new_tokens: int | None = None  # None: the client config's


@dataclass(frozen=True)
class Completion:
    text: str
    latency_s: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    attempts: int = 1


class Backend(Protocol):
    model_id: str

    def complete(self, requests: Sequence[ChatRequest]) -> list[Completion]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class GraphQuery:
    images: tuple[np.ndarray, ...]
    task: str
    camera: str


@dataclass(frozen=True)
class GraphAnswer:
    completion: Completion
    parsed: ParseResult
    model: str
    prompt: dict[str, str]
    constraint: str

    @property
    def graph(self):
        return self.parsed.triplets

    @property
    def truncated(self) -> bool:
        """Cut at the token limit (the backend says so, or a JSON answer ends inside a value); the complete
        triplets before the cut are kept."""
        return self.completion.finish_reason == "length" or self.parsed.cut

    @property
    def failure(self) -> str:
        """Why this answer is no graph at all ("" when it is one): the request failed, or the text holds no
        triplet and does not state an empty graph either (garbage, an empty reply). An answer with at least
        one valid triplet is a graph, cut or not."""
        c = self.completion
        if c.error:
            return c.error
        if self.parsed.triplets or self.parsed.empty:
            return ""
        cut = " (cut at the token limit)" if self.truncated else ""
        if self.parsed.rejected:
            reasons = ", ".join(f"{n} {reason}" for reason, n in self.parsed.reason_counts().items())
            return f"no valid triplet in the answer ({reasons}){cut}: {c.text[:120]!r}"
        return f"empty answer{cut}"

    def record(self) -> dict:
        """JSON-ready fields shared by the benchmark cache and the released graph files."""
        c = self.completion
        return {
            "model": self.model, "prompt": self.prompt, "prompt_version": self.prompt["version"],
            "constraint": self.constraint, "raw": c.text, "error": c.error,
            "triplets": [list(t) for t in self.parsed.triplets],
            "rejected": self.parsed.reason_counts(),
            "latency_s": round(c.latency_s, 6), "prompt_tokens": c.prompt_tokens,
            "completion_tokens": c.completion_tokens, "finish_reason": c.finish_reason, "attempts": c.attempts,
            "truncated": self.truncated,
        }


@dataclass
class SceneGraphVLM:
    backend: Backend
    prompt: PromptTemplate
    ontology: Ontology
    constraint: str = "none"
    name: str = ""
    relations: tuple[str, ...] = RELATIONS
    model_seconds: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.name = self.name or self.backend.model_id
        self._constraint = make_constraint(self.constraint, self.ontology.objects, self.relations)

    def requests(self, queries: Sequence[GraphQuery]) -> list[ChatRequest]:
        out = []
        for q in queries:
            p = self.prompt.render(q.task, q.camera, self.ontology.objects, self.relations)
            out.append(ChatRequest(tuple(q.images), p.system, p.user, self._constraint))
        return out

    def query(self, queries: Sequence[GraphQuery]) -> list[GraphAnswer]:
        requests = self.requests(queries)
        start = time.perf_counter()
        completions = self.backend.complete(requests)
        self.model_seconds += time.perf_counter() - start
        return [
            GraphAnswer(c, parse_triplets(c.text, self.ontology), self.name, self.prompt.identity, self.constraint)
            for c in completions
        ]

    def close(self) -> None:
        self.backend.close()
