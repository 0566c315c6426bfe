"""Argument helpers the commands share: `key=value` override items (`sgvla.core.config.parse_items`) as positional arguments."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from sgvla.core.config import SYNTAX

_ITEM = re.compile(r"[A-Za-z_][\w.]*:?=")  # key=value, or name:=value (refused by parse_items, with the fix)


def add_overrides_argument(parser, what: str, example: str) -> None:
    parser.add_argument("overrides", nargs="*", metavar="key=value", help=f"{what}, e.g. {example}; {SYNTAX}")


def split_items(items: Iterable[str]) -> tuple[list[str], list[str]]:
    """(paths, key=value items) of a command's positional arguments; an existing file or folder is a path even
    when its name looks like key=value."""
    paths, overrides = [], []
    for item in items:
        (overrides if _ITEM.match(item) and not Path(item).exists() else paths).append(item)
    return paths, overrides
