"""Output constraints that make a VLM's answer valid triplet lines over the vocabulary.

Local models decode under an xgrammar grammar; servers get a JSON schema with enums (the
OpenAI ``response_format``), which vLLM, llama.cpp, Gemini and ``sgvla vlm-serve`` honour.
Either answer goes through the same parser as free text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

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
