"""The recorded timings of docs/timings.yaml and how the docs quote them: a figure is a link to its entry,
`[1 min 55 s](timings.yaml#make-eval)`, so every time the docs give names the run it came from (the machine, its
load, the commit, the date). `python tests/readme/timings.py` prints the table docs/getting-started.md holds."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
FILE = REPO / "docs" / "timings.yaml"
TABLE_PAGE = REPO / "docs" / "getting-started.md"
# A quoted figure: the link's text is the figure, its target the entry (from the README: docs/timings.yaml#KEY).
LINK = re.compile(r"\[([^\]]+)\]\((?:docs/)?timings\.yaml#([\w-]+)\)")
# How a wall time is written: "40 s", "2.1 min", "1 min 55 s", a range over several runs "13-29 s".
WALL = re.compile(r"^\d+(\.\d+)?(-\d+(\.\d+)?)? (s|min)( \d+ s)?$")
FIELDS = ("command", "wall", "machine", "load", "commit", "date")


@dataclass(frozen=True)
class Quote:
    page: str
    line: int
    figure: str
    key: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line} [{self.figure}](...#{self.key})"


def load() -> dict:
    return yaml.safe_load(FILE.read_text(encoding="utf-8"))


def quotes(page: Path) -> list[Quote]:
    """Every timing link of a page, with its line."""
    name = page.relative_to(REPO).as_posix()
    return [Quote(name, number, m.group(1), m.group(2))
            for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
            for m in LINK.finditer(line)]


def table(data: dict | None = None) -> str:
    """The Markdown table of every recorded run, in the file's order."""
    data = load() if data is None else data
    rows = ["| entry | command | wall time | machine, load | commit | date |", "|---|---|---|---|---|---|"]
    for key, run in data["runs"].items():
        rows.append(f"| `{key}` | `{run['command']}` | {run['wall']} | {run['machine']}, {run['load']} | "
                    f"{run['commit']} | {run['date']} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
