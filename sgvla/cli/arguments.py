"""Argument helpers the commands share: `key=value` override items (`sgvla.core.config.parse_items`) as positional arguments."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from sgvla.core.config import SYNTAX

_ITEM = re.compile(r"[A-Za-z_][\w.]*:?=")  # key=value, or name:=value (refused by parse_items, with the fix)


def add_overrides_argument(parser, what: str, example: str) -> None:
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help=f"{what[:1].upper()}{what[1:]}, e.g. {example}; {SYNTAX}.")


def split_items(items: Iterable[str]) -> tuple[list[str], list[str]]:
    """(paths, key=value items) of a command's positional arguments; an existing file or folder is a path even
    when its name looks like key=value."""
    paths, overrides = [], []
    for item in items:
        (overrides if _ITEM.match(item) and not Path(item).exists() else paths).append(item)
    return paths, overrides


def sentence(text: str) -> str:
    """A help text as a sentence: capitalised, ending in a full stop. The settings' texts are written as phrases,
    being the ROS parameters' descriptions too; `--help` shows them as the sentences every help text is."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "?", "!")) else ".")


def add_settings(parser, cls) -> None:
    """A flag per field of the settings dataclass `cls` (`sgvla.core.settings`): its type, default, help and minimum
    (refused by argparse, with the setting's parser's reason); a boolean that defaults to false is a switch."""
    import argparse

    from sgvla.core.settings import specs

    for spec in specs(cls):
        if spec.kind is bool:
            action = "store_true" if spec.default is False else argparse.BooleanOptionalAction
            parser.add_argument(spec.cli_flag, dest=spec.name, action=action, default=spec.default,
                                help=sentence(spec.help))
            continue

        def parse(text: str, spec=spec):
            try:
                return spec.parse(text)
            except ValueError as e:
                raise argparse.ArgumentTypeError(str(e)) from None

        parse.__name__ = spec.kind.__name__
        default = argparse.SUPPRESS if spec.required else spec.default
        parser.add_argument(spec.cli_flag, dest=spec.name, type=parse, default=default, required=spec.required,
                            choices=spec.choices or None, help=sentence(spec.help))


def settings_from(args, cls):
    """The settings `cls` from the flags `add_settings` made."""
    from sgvla.core.settings import specs

    return cls(**{spec.name: getattr(args, spec.name) for spec in specs(cls)})
