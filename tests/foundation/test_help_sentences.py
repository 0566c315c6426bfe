"""Every `--help` of sgvla is complete sentences: the overview, each command and sub-command (`sgvla demos generate`,
`sgvla calibrate camera`), every argument. A help text that stops mid-sentence ("...and runs it;"), starts in the
middle of one, or is missing reads as a broken tool to a new user; this test reads every text argparse shows."""

from __future__ import annotations

import argparse
import re

import pytest

from sgvla.cli import SUBCOMMANDS, build_parser

# A sentence ends so (a closing bracket or quote may follow the stop).
END = re.compile(r"[.?!][)\"'`]*$")
# A word that is code, not prose, may begin a sentence as written (`libero_spatial`, `--out`, `key=value`).
CODE = re.compile(r"^(`|['\"(]?[-\w]*[_./=<>|\d-])")


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    """(the command's words, its parser, the one-line help the parent lists it with) of every command below."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), sub, listed.get(name)
                yield from _commands(sub, (*path, name))


def _every_command():
    top = build_parser()
    yield ("sgvla",), top, top.description
    yield from _commands(top, ("sgvla",))


COMMANDS = list(_every_command())


def problems(text: str | None, what: str) -> list[str]:
    """What keeps `text` from being complete sentences: missing, a lower-case start, no full stop at the end. A
    paragraph whose first line ends in a colon introduces an indented list (examples, defaults), itself exempt, as
    is a paragraph of indented lines (a table of keys, each key's text a sentence of its own source)."""
    if not text or not text.strip():
        return [f"{what}: no text"]
    found = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        lines = paragraph.splitlines()
        if all(ln.startswith(" ") for ln in lines):
            continue
        if len(lines) > 1 and lines[0].rstrip().endswith(":") and all(ln.startswith(" ") for ln in lines[1:]):
            prose = lines[0].strip()
            if not (prose[:1].isupper() or CODE.match(prose)):
                found.append(f"{what}: the list's heading {prose!r} does not start a sentence")
            continue
        prose = " ".join(paragraph.split())
        items = re.split(r"(?:^|\s)- (?=\S)", prose) if prose.startswith("- ") else [prose]
        for item in filter(None, (i.strip() for i in items)):
            if not (item[:1].isupper() or item[:1].isdigit() or CODE.match(item)):
                found.append(f"{what}: starts mid-sentence: {item[:60]!r}")
            if not END.search(item):
                found.append(f"{what}: stops mid-sentence: ...{item[-60:]!r}")
    return found


@pytest.mark.parametrize("words, parser, listed", COMMANDS, ids=[" ".join(c[0]) for c in COMMANDS])
def test_help_is_complete_sentences(words, parser, listed):
    command = " ".join(words)
    found = problems(listed, f"{command} (as listed)") + problems(parser.description, f"{command} description")
    if parser.epilog:
        found += problems(parser.epilog, f"{command} epilog")
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        shown = parser._get_formatter()._expand_help(action) if action.help else action.help  # %(default)s filled
        found += problems(shown, f"{command} {name}")
    assert not found, "\n".join(found)


def test_every_command_is_checked():
    assert {words[1] for words, _, _ in COMMANDS[1:]} == set(SUBCOMMANDS)
    assert {("sgvla", "demos", "generate"), ("sgvla", "calibrate", "camera")} <= {w for w, _, _ in COMMANDS}


def test_the_check_tells_a_sentence_from_a_fragment():
    assert problems("Runs the plan; resumable.", "x") == []
    assert problems("`libero_spatial` only (default 128).", "x") == []
    assert problems("Examples:\n  sgvla eval\n  sgvla report out", "x") == []
    assert problems("- A folder: its files.\n- A file (HDF5).", "x") == []
    assert problems("which registers its parser here and runs it;", "x") == [
        "x: starts mid-sentence: 'which registers its parser here and runs it;'",
        "x: stops mid-sentence: ...'which registers its parser here and runs it;'"]
    assert problems("examples:\n  sgvla eval", "x") == ["x: the list's heading 'examples:' does not start a sentence"]
    assert problems(None, "x") == ["x: no text"]
