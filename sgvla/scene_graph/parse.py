"""Triplets from free-form VLM answers, without guessing.

Accepted shapes: one triplet per line, with or without bullets or numbering,
in parentheses or brackets, as exactly three fields separated by commas, ``|``,
``;`` or tabs, or written as words without separators (``the plate is left of the
stove``, which must read one way only); several bracketed triplets on one
line; JSON (a list of ``[s, r, o]``, of ``{"subject", "relation", "object"}``
objects or of triplet strings, possibly under a key such as ``"triplets"``, or
one JSON object per line); code fences. Reasoning before the answer
(``<think>...</think>``) is dropped, and an unclosed ``<think>`` drops the rest.

Answers cut at a token limit keep what they hold: a JSON answer that ends inside
a value is closed after its last complete element (``ParseResult.cut``), and a
text answer keeps its complete lines (the partial last one is rejected unless it
happens to read as a triplet). A JSON answer holding no triplet at all
(``{"triplets": []}``, ``[]``) states an empty graph (``ParseResult.empty``);
anything else without a triplet is not an answer.

Objects resolve through the ontology (exact names, suffix-free names when they
name one object, configured aliases); relations through a fixed synonym table
(``left of``, ``LEFT_OF``, ``on``, ``inside``, ...). Anything else is rejected
with a reason and counted, never mapped to a nearest guess. Parsing never raises.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, NamedTuple

from sgvla.scene_graph.ontology import RELATIONS, Ontology, words_of
from sgvla.scene_graph.triplet import Graph, Triplet

NOT_A_TRIPLET = "not a triplet"
UNKNOWN_OBJECT = "unknown object"
AMBIGUOUS_OBJECT = "ambiguous object"
UNKNOWN_RELATION = "unknown relation"
SAME_OBJECT = "subject equals object"
AMBIGUOUS_LINE = "several readings"
TRUNCATED = "cut at the token limit"  # the entry a cut answer broke off (see ParseResult.dropped_by_reason)
# Every reason an entry is dropped for, in the order tables show them.
DROP_REASONS = (UNKNOWN_OBJECT, AMBIGUOUS_OBJECT, UNKNOWN_RELATION, SAME_OBJECT, NOT_A_TRIPLET, AMBIGUOUS_LINE,
                TRUNCATED)

_SYNONYMS = {
    "is_left_of": ("left of", "to the left of", "to left of", "on the left of", "on left of", "left"),
    "is_right_of": ("right of", "to the right of", "to right of", "on the right of", "on right of", "right"),
    "is_in_front_of": ("in front of", "front of", "in the front of", "in front", "infront of", "front"),
    "is_behind": ("behind", "behind of", "in back of", "back of", "in the back of", "at the back of"),
    "is_on_top_of": ("on top of", "on the top of", "on top", "on", "onto", "atop", "above"),
    "is_below_of": ("below of", "below", "under", "underneath", "beneath", "under of"),
    "is_inside": ("inside", "inside of", "in", "within", "contained in", "contained by"),
    "contains": ("contains", "contain", "containing", "contains of"),
}
_LEADING_VERBS = frozenset({"is", "are", "sits", "lies", "located"})
_MAX_WORDS = 40
_MAX_RELATION_WORDS = 5
_MAX_JSON_DEPTH = 6
_SUBJECT_KEYS = ("subject", "subj", "s", "head", "source")
_RELATION_KEYS = ("relation", "predicate", "rel", "r", "relationship")
_OBJECT_KEYS = ("object", "obj", "o", "tail", "target")

_BULLET = re.compile(r"^\s*(?:[-*\u2022+>]+|\(?\d{1,4}[.):]|#+)\s*")
_GROUP = re.compile(r"[(\[{]([^()\[\]{}]*)[)\]}]")
_FIELD_JUNK = " \t\"'`*_[](){}<>.:"


class Rejection(NamedTuple):
    line: str
    reason: str


@dataclass(frozen=True)
class ParseResult:
    """Valid triplets, and every examined entry that did not yield one.

    ``n_lines`` counts examined entries: text lines, bracketed groups when a line
    holds several, or JSON items. Blank lines, fences and headers ending in ':'
    are not entries.
    """

    triplets: Graph
    rejected: tuple[Rejection, ...]
    n_lines: int
    cut: bool = False  # a JSON answer ended inside a value; its complete elements were kept
    empty: bool = False  # the answer is JSON stating an empty graph
    last_rejected: bool = False  # the last examined entry was rejected

    def reason_counts(self) -> dict[str, int]:
        return dict(Counter(reason for _, reason in self.rejected))

    def dropped_by_reason(self, truncated: bool = False) -> dict[str, int]:
        """Entries of the answer that gave no triplet, by reason (keys of `DROP_REASONS`). With `truncated` (the
        answer was cut at the token limit) the entry the cut broke counts as `TRUNCATED`: a JSON answer's partial
        element (closed away, so it is no examined entry), or a text answer's last entry when it was rejected."""
        counts = Counter(reason for _, reason in self.rejected)
        if truncated and self.cut:
            counts[TRUNCATED] += 1
        elif truncated and self.last_rejected:
            counts[self.rejected[-1].reason] -= 1
            counts[TRUNCATED] += 1
        return {reason: n for reason, n in counts.items() if n}


def _relation_key(words: list[str]) -> str:
    while words and words[0] in _LEADING_VERBS:
        words = words[1:]
    return "_".join(words)


def _build_relation_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for relation in RELATIONS:
        for phrase in (relation, *_SYNONYMS[relation]):
            key = _relation_key(words_of(phrase))
            if table.setdefault(key, relation) != relation:
                raise AssertionError(f"relation synonym {phrase!r} is ambiguous")
    return table


_RELATION_TABLE = _build_relation_table()


def resolve_relation(text: str) -> str | None:
    return _RELATION_TABLE.get(_relation_key(words_of(text)))


class _Parser:
    def __init__(self, ontology: Ontology) -> None:
        self.ontology = ontology
        self.triplets: list[Triplet] = []
        self.rejected: list[Rejection] = []
        self.entries = 0
        self.last_rejected = False

    def result(self, cut: bool = False, empty: bool = False) -> ParseResult:
        return ParseResult(Graph(tuple(self.triplets)), tuple(self.rejected), self.entries, cut, empty,
                           self.last_rejected)

    def _accept(self, entry: str, triplet: Triplet | None, reason: str) -> None:
        self.entries += 1
        self.last_rejected = triplet is None
        if triplet is None:
            self.rejected.append(Rejection(entry, reason))
        else:
            self.triplets.append(triplet)

    def _object_problem(self, text: str) -> str:
        return AMBIGUOUS_OBJECT if self.ontology.is_ambiguous(text) else UNKNOWN_OBJECT

    def fields(self, parts: list[str]) -> tuple[Triplet | None, str]:
        subject_text, relation_text, object_text = (p.strip(_FIELD_JUNK) for p in parts)
        subject = self.ontology.resolve(subject_text)
        obj = self.ontology.resolve(object_text)
        for text, name in ((subject_text, subject), (object_text, obj)):
            if name is None:
                return None, self._object_problem(text)
        relation = resolve_relation(relation_text)
        if relation is None:
            return None, UNKNOWN_RELATION
        if subject == obj:
            return None, SAME_OBJECT
        return Triplet(subject, relation, obj), ""  # type: ignore[arg-type]

    def sentence(self, text: str) -> tuple[Triplet | None, str]:
        """Read ``<subject> <relation> <object>`` from words; exactly one reading must fit."""
        words = words_of(text)
        if len(words) > _MAX_WORDS:
            return None, NOT_A_TRIPLET
        readings: set[Triplet] = set()
        reason = NOT_A_TRIPLET
        for i in range(1, len(words) - 1):
            for j in range(i + 1, min(i + _MAX_RELATION_WORDS, len(words) - 1) + 1):
                relation = _RELATION_TABLE.get(_relation_key(words[i:j]))
                if relation is None:
                    continue
                found, problem = self.fields([" ".join(words[:i]), relation, " ".join(words[j:])])
                if found is not None:
                    readings.add(found)
                elif reason != AMBIGUOUS_OBJECT:
                    reason = problem
        if len(readings) == 1:
            return readings.pop(), ""
        return None, AMBIGUOUS_LINE if readings else reason

    def entry(self, text: str) -> tuple[Triplet | None, str]:
        """Three separated fields, or words when the entry has no separator."""
        for separator in (",", "|", ";", "\t"):
            parts = [p for p in text.split(separator) if p.strip(_FIELD_JUNK)]
            if len(parts) > 1:
                return self.fields(parts) if len(parts) == 3 else (None, NOT_A_TRIPLET)
        return self.sentence(text)

    def line(self, raw: str) -> None:
        text = _BULLET.sub("", raw.strip())
        if text.startswith(("{", "[")) and self.json_text(text):
            return
        groups = [g for g in _GROUP.findall(text) if len(re.findall(r"[,|;]", g)) >= 2]
        for candidate in groups or [text]:
            self._accept(candidate.strip(), *self.entry(candidate))

    def json_text(self, text: str) -> bool:
        """Parse ``text`` as JSON holding triplets; False when it is not such JSON."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return False
        if not isinstance(data, (list, dict)):
            return False
        before = self.entries
        self.json_item(data, 0)
        return self.entries > before

    def json_item(self, item: Any, depth: int) -> None:
        if depth > _MAX_JSON_DEPTH:
            return
        if isinstance(item, str):
            self.line(item)
        elif isinstance(item, list) and len(item) == 3 and all(isinstance(p, str) for p in item):
            self._accept(_entry_text(item), *self.fields(list(item)))
        elif isinstance(item, dict):
            keys = {str(k).lower(): v for k, v in item.items()}
            picked = [
                next((keys[k] for k in group if k in keys), None)
                for group in (_SUBJECT_KEYS, _RELATION_KEYS, _OBJECT_KEYS)
            ]
            if all(isinstance(p, str) for p in picked):
                self._accept(_entry_text(item), *self.fields(picked))  # type: ignore[arg-type]
                return
            for value in item.values():
                if isinstance(value, (list, dict)):
                    self.json_item(value, depth + 1)
        elif isinstance(item, list):
            for value in item:
                if isinstance(value, (list, dict, str)):
                    self.json_item(value, depth + 1)
                else:
                    self._accept(_entry_text(value), None, NOT_A_TRIPLET)


def _holds_no_entry(text: str) -> bool:
    """JSON of containers only, e.g. ``{"triplets": []}`` or ``[]``: an explicitly empty graph."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return False

    def empty(item: Any, depth: int) -> bool:
        if isinstance(item, dict):
            return depth < _MAX_JSON_DEPTH and all(empty(v, depth + 1) for v in item.values())
        return isinstance(item, list) and depth < _MAX_JSON_DEPTH and all(empty(v, depth + 1) for v in item)

    return empty(data, 0)


def _entry_text(item: Any) -> str:
    try:
        return json.dumps(item)
    except (ValueError, RecursionError):
        return f"<{type(item).__name__}>"


def _answer_text(text: str) -> str:
    """Drop reasoning and fences: keep what follows the last ``</think>``, cut an unclosed ``<think>``."""
    closing = list(re.finditer(r"</think\s*>", text, re.IGNORECASE))
    if closing:
        text = text[closing[-1].end() :]
    opening = re.search(r"<think\s*>", text, re.IGNORECASE)
    if opening:
        text = text[: opening.start()]
    text = re.sub(r"</?answer\s*>", "\n", text, flags=re.IGNORECASE)
    return "\n".join(line for line in text.splitlines() if not line.strip().startswith("```"))


def close_cut_json(text: str) -> str | None:
    """``text`` (starting with ``[`` or ``{``) cut after its last complete nested element and closed, or None.

    For a JSON value that was cut off (a token limit): every container still open after the last
    complete element is closed, so the elements before the cut parse. None when the text holds a
    complete top-level value (it was not cut, or other text follows it) or no complete element.
    """
    stack: list[str] = []
    in_string = escaped = False
    last: tuple[int, str] | None = None  # (end of the last complete element, closers for what is open)
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append("]" if ch == "[" else "}")
        elif ch in "]}":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return None
            last = (i + 1, "".join(reversed(stack)))
    if last is None or not stack:
        return None
    return text[: last[0]] + last[1]


def parse_triplets(text: str, ontology: Ontology) -> ParseResult:
    """Valid triplets of ``text`` over ``ontology``, with every rejected entry and its reason."""
    parser = _Parser(ontology)
    if not isinstance(text, str):
        return parser.result()
    answer = _answer_text(text)
    # A JSON answer, possibly with prose around it: from the first bracket to the last.
    first = min((i for i in (answer.find("["), answer.find("{")) if i >= 0), default=-1)
    last = max(answer.rfind("]"), answer.rfind("}"))
    if 0 <= first < last and parser.json_text(answer[first : last + 1]):
        return parser.result()
    if 0 <= first < last and answer.strip() == answer[first : last + 1] and _holds_no_entry(answer[first : last + 1]):
        return parser.result(empty=True)
    if first >= 0:
        closed = close_cut_json(answer[first:])
        if closed is not None and parser.json_text(closed):
            return parser.result(cut=True)
    for raw in answer.splitlines():
        line = raw.strip()
        if not re.search(r"[0-9A-Za-z]", line) or line.endswith(":"):
            continue
        parser.line(line)
    return parser.result()
