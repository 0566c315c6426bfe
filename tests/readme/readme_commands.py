"""The shell commands of README.md and of every page of docs/, as a new user would copy them: every indented code
block (continuation lines joined, comments dropped), in order, with the page and heading it stands under and its
`# needs: ...` mark."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
# The pages a user reads: the README, then the docs it maps (each walked in a folder of its own).
PAGES = (README, *sorted((REPO / "docs").glob("*.md")))
# The one command form of the docs: the venv's commands on the PATH by its activation, never a path into .venv.
ACTIVATE = "source .venv/bin/activate"
# The first word of a shell command line; a block whose lines start otherwise is not shell (YAML, Python).
SHELL_WORDS = re.compile(r"^(sgvla|\.venv/bin/[\w-]+|hf|ros2|lerobot-[\w-]+|huggingface-cli|ray|python|sudo|cd|source|colcon|make|"
                         r"[A-Z_]+=\S+|#!/bin/bash|#SBATCH)\b")
NEEDS = re.compile(r"needs:\s*([\w ,-]+)")


@dataclass(frozen=True)
class Command:
    page: str          # the page's path in the checkout (README.md, docs/NAME.md)
    line: int          # 1-based line of the page where the command starts
    section: str       # the heading it stands under
    text: str          # the command, continuation lines joined, its comment dropped
    comment: str       # its trailing comment ('' if none)
    needs: tuple[str, ...]  # what the README says it needs (`# needs: arm, ros2`), else ()

    def __str__(self) -> str:
        return f"{self.page}:{self.line} {self.text}"


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    section: str
    lines: tuple[str, ...]

    @property
    def kind(self) -> str:
        """shell, yaml or python: how the block reads."""
        first = next((ln for ln in self.lines if ln.strip() and not ln.lstrip().startswith("# ")), "")
        if first.startswith(("from ", "import ")):
            return "python"
        if SHELL_WORDS.match(first):
            return "shell"
        if re.match(r"^[a-z_]+:\s", first):
            return "yaml"
        return "unknown"


def _strip_comment(line: str) -> tuple[str, str]:
    """The line without its trailing `# comment` (a `#` outside quotes after a space), and the comment."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


def blocks(text: str | None = None, page: Path = README) -> list[Block]:
    """The indented code blocks (4+ spaces after a blank line; inside numbered items 7) of a page."""
    lines = (page.read_text() if text is None else text).splitlines()
    name = page.relative_to(REPO).as_posix()
    out, section, current, start, indent = [], "", [], 0, 0
    for i, line in enumerate(lines):
        stripped = line.strip()
        width = len(line) - len(line.lstrip(" "))
        if current:
            if not stripped or width >= indent:
                current.append(line[indent:] if stripped else "")
                continue
            out.append(Block(name, start + 1, section, tuple(_trim(current))))
            current = []
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        if stripped and width >= 4 and (i == 0 or not lines[i - 1].strip()) and not stripped.startswith("|"):
            current, start, indent = [line[width:]], i, width
    if current:
        out.append(Block(name, start + 1, section, tuple(_trim(current))))
    return out


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def commands(text: str | None = None, page: Path = README) -> tuple[list[Command], list[Block]]:
    """A page's shell commands, in order, and its blocks that are not shell (for the test to account for)."""
    cmds, others = [], []
    for block in blocks(text, page):
        if block.kind != "shell":
            others.append(block)
            continue
        pending, first = "", 0
        for offset, raw in enumerate(block.lines):
            if not raw.strip() or (raw.lstrip().startswith("#") and not pending):
                continue
            body, comment = _strip_comment(raw)
            if not pending:
                first = block.line + offset
            if body.endswith("\\"):
                pending += body[:-1].strip() + " "
                continue
            full = (pending + body.strip()).strip()
            pending = ""
            needs = NEEDS.search(comment)
            cmds.append(Command(block.page, first, block.section, full, comment,
                                tuple(n.strip() for n in needs.group(1).split(",")) if needs else ()))
    return cmds, others


def all_commands() -> tuple[list[Command], list[Block]]:
    """The commands and other blocks of every page, page after page."""
    cmds, others = [], []
    for page in PAGES:
        c, o = commands(page=page)
        cmds += c
        others += o
    return cmds, others
