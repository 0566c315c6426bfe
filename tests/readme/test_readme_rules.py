"""Part of `make test` (fast): every block of the README and of docs/ reads as shell, YAML or Python, the docs walk
(`test_readme_walk.py`, `make test-readme`) has a rule for every command, the docs use one command form (the venv's
activation, never a path into .venv) and `make install` ends by printing it, every page is in the README's map, and
every relative link lands on a file and heading that exist."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from readme_commands import ACTIVATE, PAGES, README, REPO, all_commands, blocks, commands  # noqa: E402
from walk_rules import rule_for  # noqa: E402

CMDS, OTHER_BLOCKS = all_commands()
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_every_block_is_shell_yaml_or_python():
    """A block the walk cannot read (not shell, not a YAML plan fragment, not Python) is a docs error."""
    assert [f"{b.page}:{b.line}" for b in OTHER_BLOCKS if b.kind not in ("yaml", "python")] == []


def test_every_command_has_a_rule():
    unknown = [str(c) for c in CMDS if rule_for(c.text, c.comment) is None]
    assert unknown == [], f"commands the walk does not know how to treat (add a rule): {unknown}"


def test_commands_are_joined_and_marked():
    """Continuation lines join, comments go, `needs:` marks are read, and a `#` inside quotes stays."""
    text = ("## S\n\n    sgvla eval a=1 \\\n        b='x # y'   # comment; needs: arm, hub\n"
            "    # a comment line\n    sgvla doctor\n\nA plan:\n\n    key: {a: 1}\n")
    cmds, others = commands(text)
    assert [(c.text, c.needs, c.section, c.page) for c in cmds] == [
        ("sgvla eval a=1 b='x # y'", ("arm", "hub"), "S", "README.md"), ("sgvla doctor", (), "S", "README.md")]
    assert [b.kind for b in others] == ["yaml"]
    assert rule_for("sgvla frobnicate now", "") is None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_one_command_form(page):
    """After `make install`, `source .venv/bin/activate` puts every command on the PATH; no page writes a path into
    the venv instead (`.venv/bin/sgvla`), which would be a second form that works only from the checkout's root."""
    other = [f"{page.name}:{n}: {line.strip()}" for n, line in enumerate(page.read_text().splitlines(), 1)
             if ".venv/bin/" in line.replace(ACTIVATE, "")]
    assert not other, f"write these as `{ACTIVATE}` then the bare command: {other}"


def test_the_readme_starts_with_install_and_activation():
    first = next(b for b in blocks() if b.kind == "shell")
    texts = [c.text for c in commands()[0] if c.line >= first.line and c.line < first.line + len(first.lines)]
    assert texts[:2] == ["make install", ACTIVATE], texts


def test_make_install_ends_by_printing_the_activation():
    """scripts/install.sh's last command prints the activation line, so `make install` ends with what to type."""
    lines = [ln.strip() for ln in (REPO / "scripts/install.sh").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    assert re.match(r"(printf|echo|log)\b", lines[-1]) and ACTIVATE in lines[-1], lines[-1]
    assert "@scripts/install.sh" in (REPO / "Makefile").read_text()


def test_every_page_is_in_the_map():
    text = README.read_text()
    unmapped = [p.name for p in PAGES[1:] if f"](docs/{p.name})" not in text]
    assert not unmapped, f"docs pages the README's map does not list: {unmapped}"
    assert len(text.splitlines()) <= 250, "the README is at most 250 lines: the rest goes in docs/"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_land(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md":
            slugs = {_slug(line.lstrip("#")) for line in file.read_text().splitlines() if line.startswith("#")}
            broken += [target] if anchor not in slugs else []
    assert not broken, f"{page.name}: links to nothing: {broken}"


def test_a_slug_is_githubs():
    assert _slug("ROS 2 hardware graph (`sgvla launch hardware`, `ros2 launch sgvla_ros hardware.launch.py`)") == \
        "ros-2-hardware-graph-sgvla-launch-hardware-ros2-launch-sgvla_ros-hardwarelaunchpy"
