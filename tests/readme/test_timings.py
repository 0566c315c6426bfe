"""Every time the docs give for a command comes from a recorded run (docs/timings.yaml: the command, its wall time,
the machine and its load, the commit, the date), and the docs cannot drift from the record: a quoted figure is a
link to its entry and must equal it, a command in a table with a time column must have one, a duration in minutes
written without its link is refused, every entry is cited, and the table of docs/getting-started.md is the file."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from readme_commands import PAGES, REPO  # noqa: E402
from timings import FIELDS, LINK, TABLE_PAGE, WALL, load, quotes, table  # noqa: E402

DATA = load()
RUNS = DATA["runs"]
QUOTES = [q for page in PAGES for q in quotes(page)]
# A duration a reader takes for a command's time: minutes (seconds are also settings and latencies in these docs).
MINUTES = re.compile(r"\b\d+(\.\d+)?(-\d+(\.\d+)?)? (min|minutes?)\b")


@pytest.mark.parametrize("key", RUNS)
def test_every_run_says_what_ran_where_and_when(key):
    run = RUNS[key]
    missing = [f for f in FIELDS if not str(run.get(f, "")).strip()]
    assert not missing, f"docs/timings.yaml: {key} lacks {missing}"
    assert run["machine"] in DATA["machines"], f"{key}: machine {run['machine']!r} is not under machines:"
    assert WALL.match(str(run["wall"])), f"{key}: wall {run['wall']!r} is not 'N s', 'N min', 'N min N s' or 'N-M s'"
    assert isinstance(run["date"], date), f"{key}: date {run['date']!r} is not YYYY-MM-DD"
    assert re.fullmatch(r"[0-9a-f]{7,40}", str(run["commit"])), f"{key}: commit {run['commit']!r}"


def test_every_commit_is_in_the_history():
    """A recorded run names a commit of this repository (a typo would cite a run nobody can find)."""
    unknown = [f"{key}: {run['commit']}" for key, run in RUNS.items()
               if subprocess.run(["git", "cat-file", "-e", f"{run['commit']}^{{commit}}"], cwd=REPO,
                                 capture_output=True).returncode != 0]
    assert not unknown, f"commits not in this repository: {unknown}"


def test_quoted_figures_are_the_recorded_ones():
    assert QUOTES, "the docs quote no recorded timing"
    missing = [str(q) for q in QUOTES if q.key not in RUNS]
    assert not missing, f"timings quoted without a recorded run (add it to docs/timings.yaml): {missing}"
    wrong = [f"{q}: recorded {RUNS[q.key]['wall']}" for q in QUOTES if q.figure != str(RUNS[q.key]["wall"])]
    assert not wrong, f"figures that differ from docs/timings.yaml: {wrong}"


def test_every_recorded_run_is_cited():
    cited = {q.key for q in QUOTES}
    assert not [k for k in RUNS if k not in cited], "entries of docs/timings.yaml no page quotes"


def _tables(text: str):
    """(header cells, rows of cells) of every Markdown table of a page."""
    rows = []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            yield rows[0], rows[2:]
            rows = []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_documented_command_has_its_timing(page):
    """A table with a time column gives every row's time as a recorded run's figure: a command whose recorded
    timing is missing fails here."""
    untimed = []
    for header, rows in _tables(page.read_text(encoding="utf-8")):
        for col in [i for i, cell in enumerate(header) if cell.lower().startswith("time")]:
            untimed += [row[0] for row in rows if not LINK.search(row[col])]
    assert not untimed, f"{page.name}: rows without a recorded timing: {untimed}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_duration_in_minutes_without_its_record(page):
    text = page.read_text(encoding="utf-8").replace(table(), "")
    loose = [m.group(0) for line in LINK.sub("", text).splitlines() for m in MINUTES.finditer(line)]
    assert not loose, f"{page.name}: durations with no recorded run (link them to docs/timings.yaml): {loose}"


def test_the_table_is_the_file():
    assert table() in TABLE_PAGE.read_text(encoding="utf-8"), \
        f"{TABLE_PAGE.name}: the table of recorded timings differs from docs/timings.yaml; it is:\n{table()}"


def test_the_figure_format_is_read_as_written():
    text = "[1 min 55 s](docs/timings.yaml#make-eval), [40 s](timings.yaml#x)"
    assert [m.groups() for m in LINK.finditer(text)] == [("1 min 55 s", "make-eval"), ("40 s", "x")]
    assert all(WALL.match(w) for w in ("40 s", "2.1 min", "1 min 55 s", "13-29 s"))
    assert not any(WALL.match(w) for w in ("about a minute", "2 minutes", "1.9min"))
