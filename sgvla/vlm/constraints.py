"""Output constraints that make a VLM's answer valid triplet lines over the vocabulary.

Local models decode under an xgrammar grammar; servers get a JSON schema with enums (the
OpenAI ``response_format``), which vLLM, llama.cpp, Gemini and ``sgvla vlm-serve`` honour.
Either answer goes through the same parser as free text.

:func:`full_graph_tokens` is the token budget an answer needs to hold a full graph of a scene.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from sgvla.scene_graph.ontology import RELATIONS

CONSTRAINTS = ("none", "grammar", "json_schema")


@dataclass(frozen=True)
class Constraint:
    kind: str  # "grammar" (EBNF) or "json_schema"
    spec: str


def _alternatives(names: tuple[str, ...]) -> str:
    return " | ".join(json.dumps(n) for n in names)


def triplet_grammar(objects: tuple[str, ...], relations: tuple[str, ...]) -> str:
    """EBNF of one or more ``(subject, relation, object)`` lines, the prompt's answer format."""
    return (
        'root ::= line+\n'
        'line ::= "(" object ", " relation ", " object ")\\n"\n'
        f"object ::= {_alternatives(objects)}\n"
        f"relation ::= {_alternatives(relations)}\n"
    )


def triplet_schema(objects: tuple[str, ...], relations: tuple[str, ...]) -> dict:
    """``{"triplets": [{"subject", "relation", "object"}, ...]}`` with names as enums."""
    item = {
        "type": "object",
        "properties": {"subject": {"type": "string", "enum": list(objects)},
                       "relation": {"type": "string", "enum": list(relations)},
                       "object": {"type": "string", "enum": list(objects)}},
        "required": ["subject", "relation", "object"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"triplets": {"type": "array", "items": item}},
        "required": ["triplets"],
        "additionalProperties": False,
    }


def make_constraint(kind: str, objects: tuple[str, ...], relations: tuple[str, ...]) -> Constraint | None:
    if kind not in CONSTRAINTS:
        raise ValueError(f"unknown constraint {kind!r}; choose from {list(CONSTRAINTS)}")
    if kind == "grammar":
        return Constraint(kind, triplet_grammar(objects, relations))
    if kind == "json_schema":
        return Constraint(kind, json.dumps(triplet_schema(objects, relations)))
    return None


def full_graph_json(objects: Sequence[str], relations: Sequence[str] = RELATIONS) -> str:
    """The longest full graph of ``objects`` in the constrained JSON form (``triplet_schema``, written with
    ``json.dumps``' separators): ground truth relates every ordered pair of visible objects by exactly one
    relation, so a full graph is every ordered pair once; each takes the longest relation name."""
    longest = max(relations, key=len)
    items = [{"subject": s, "relation": longest, "object": o} for s in objects for o in objects if s != o]
    return json.dumps({"triplets": items})


def full_graph_tokens(objects: Sequence[str], relations: Sequence[str] = RELATIONS) -> int:
    """New tokens that always hold a full graph of ``objects``: the UTF-8 bytes of :func:`full_graph_json`
    plus the end token. Byte-level tokenizers (Qwen, GPT, Gemma's byte fallback) never emit a token of
    less than one byte, so this bounds every such tokenizer from above without loading one (real ones
    pack several bytes into most tokens). Answers with more whitespace (pretty-printed JSON) can need more: the
    per-answer ``truncated`` flag catches what this bound misses."""
    return len(full_graph_json(objects, relations).encode()) + 1
