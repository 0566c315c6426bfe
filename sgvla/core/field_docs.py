"""What each field of a config dataclass means, read from the comments beside it in its source.

A plan's keys are explained where they are declared (``episodes: int = 10  # seeds seed_offset .. ``); a help
screen that repeated them would drift from the code. `field_docs` reads those comments instead: a field's text is
the comment on its line, after any comment lines directly above it, joined. `sgvla eval --help` lists the plan's
keys from them, and a test requires every key of a plan to have one.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import textwrap
import re
import tokenize

_FIELD = re.compile(r"\s*([A-Za-z_]\w*)\s*:[^=]")  # a field declaration: ``name: type ...``


def field_docs(cls) -> dict[str, str]:
    """{field name: its comments} for the dataclass `cls` (fields without a comment are absent)."""
    lines = textwrap.dedent(inspect.getsource(cls)).splitlines(keepends=True)
    inline: dict[int, str] = {}  # row -> the comment ending it (rows from 1)
    alone: dict[int, str] = {}  # row -> a comment that is the whole row
    for tok in tokenize.generate_tokens(io.StringIO("".join(lines)).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            (alone if not tok.line[:tok.start[1]].strip() else inline)[tok.start[0]] = text
    names = {f.name for f in dataclasses.fields(cls)}
    docs = {}
    for row, line in enumerate(lines, start=1):
        match = _FIELD.match(line)
        if not match or match[1] not in names:
            continue
        above, r = [], row - 1
        while r in alone:
            above.insert(0, alone[r])
            r -= 1
        text = " ".join([*above, inline.get(row, "")]).strip()
        if text:
            docs[match[1]] = text
    return docs


def first_sentence(text: str, limit: int = 160) -> str:
    """The text's first sentence, as a sentence: capitalised, ending in a full stop, at most about `limit`
    characters (cut at a word, with an ellipsis)."""
    text = re.split(r"(?<=[^.\s])\. ", text.strip(), maxsplit=1)[0]
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1]
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0] + " ..."
    return (text[:1].upper() + text[1:] + ("" if text.endswith("...") else ".")) if text else ""
