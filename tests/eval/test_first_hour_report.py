"""The report as a new user reads it: plots whose legend covers no bar, a 0% bar that shows (a stub with its count),
k/n on every bar, tick labels that do not overlap, the pooled "all" group in every plot; table.md and table.csv
using the same word for the sequential verdict; Ctrl-C (or SIGTERM) while the report is written: one line saying
what was saved, exit 130 (143), no traceback, every file whole."""

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import sgvla.eval.report as report
from sgvla.cli import main
from sgvla.eval.report import SequentialPlan, csv_rows, markdown_table, progress_figure, success_figure, write_report

MODES = ["standard", "scene_graph", "scene_graph_full", "filler", "wrong_graph"]


def records(tasks: int, perturbations: list[str], seeds: int = 3) -> list[dict]:
    """Episodes of two policies; wrong_graph never succeeds (its bars are 0%)."""
    rng = random.Random(0)
    out = []
    for policy in ("prompt_grounded", "expert"):
        for task in range(tasks):
            for pert in perturbations:
                for mode in MODES:
                    for seed in range(seeds):
                        success = mode != "wrong_graph" and rng.random() < 0.6
                        out.append({"task_id": task, "perturbation": pert, "policy": policy, "mode": mode,
                                    "seed": seed, "success": success,
                                    "progress": 1.0 if success else (0.0 if mode == "wrong_graph" else 0.4),
                                    "failure_class": None if success else "wrong_object"})
    return out


def overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def check_figure(fig, groups: int, count_texts: bool) -> None:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = fig.axes
    assert len(axes) == 2  # a panel per policy
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    for ax in axes:
        assert not overlaps(box, ax.get_window_extent(renderer)), "the legend lies over a panel"
        ticks = [t for t in ax.get_xticklabels() if t.get_text()]
        assert len(ticks) == groups and ticks[-1].get_text() == "all"  # the pooled group, last
        boxes = [t.get_window_extent(renderer) for t in ticks]
        assert not any(overlaps(a, b) for a, b in zip(boxes, boxes[1:])), [t.get_text() for t in ticks]
        bars = [p for p in ax.patches if p.get_width() > 0]
        assert len(bars) == groups * len(MODES)
        # every bar shows, a 0% one too: at least 2 pixels tall
        assert min(p.get_window_extent(renderer).height for p in bars) >= 2
        texts = [t.get_text() for t in ax.texts]
        assert len(texts) == len(bars)
        if count_texts:
            assert all("/" in t for t in texts) and "0/3" in texts  # k/n, the 0% bars' too


def test_success_and_progress_plots_many_tasks_and_perturbations():
    recs = records(10, ["table7_swap_bowls", "ambiguous_prompt"])
    check_figure(success_figure(recs), 21, True)
    check_figure(progress_figure(recs), 21, False)


def test_one_task_still_has_the_pooled_group():
    recs = records(1, ["ambiguous_prompt"])
    fig = success_figure(recs)
    check_figure(fig, 2, True)
    assert "ambiguous_prompt" in fig.axes[0].get_xlabel()  # one perturbation: named once, on the axis
    check_figure(progress_figure(recs), 2, False)


def test_table_md_and_csv_say_the_same_word():
    # all planned pairs run, no decision: the CSV's `inconclusive`, and the markdown's too
    recs = [{"task_id": 0, "perturbation": "p", "policy": "x", "mode": mode, "seed": seed,
             "success": (seed % 2 == 0) if mode == "standard" else (seed % 2 == 1 or seed == 4)}
            for seed in range(6) for mode in ("standard", "scene_graph")]
    plan = SequentialPlan(0.05, 6, 1)
    words = {r["sequential"] for r in csv_rows(recs, plan=plan) if r["mode"] == "scene_graph"}
    assert words == {"inconclusive"}
    table = markdown_table(recs, plan=plan)
    assert "| inconclusive |" in table and "not decided" not in table


@pytest.fixture
def run_dir(tmp_path):
    import json

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records(2, ["p"])))
    return folder


def interrupt_while_plotting(monkeypatch, sig: int) -> None:
    """A real signal to this process as the success plot begins to be drawn, as a user's Ctrl-C would come."""
    draw = report.bar_figure

    def drawing(*args, **kwargs):
        os.kill(os.getpid(), sig)
        return draw(*args, **kwargs)

    monkeypatch.setattr(report, "bar_figure", drawing)


def test_ctrl_c_while_plotting_says_what_was_saved(run_dir, monkeypatch, capsys):
    (run_dir / "success.png").write_bytes(b"an older plot")
    interrupt_while_plotting(monkeypatch, signal.SIGINT)
    assert main(["report", str(run_dir)]) == 130
    out, err = capsys.readouterr()
    last = out.strip().splitlines()[-1]
    assert last == (f"sgvla report: interrupted while writing the report: saved table.md, table.csv, "
                    f"comparisons.csv, failures.csv; the records are complete, `sgvla report {run_dir}` writes the "
                    "report again"), out
    assert "Traceback" not in out + err
    assert (run_dir / "success.png").read_bytes() == b"an older plot"  # never half written
    assert not list(run_dir.glob(".*.tmp"))
    monkeypatch.undo()
    assert main(["report", str(run_dir)]) == 0
    assert (run_dir / "success.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.integration
def test_sigterm_while_plotting_is_143_and_one_line(run_dir):
    code = textwrap.dedent(f"""
        import os, signal, sys
        import sgvla.eval.report as report
        from sgvla.cli import main
        draw = report.bar_figure
        def drawing(*a, **k):
            os.kill(os.getpid(), signal.SIGTERM)
            return draw(*a, **k)
        report.bar_figure = drawing
        sys.exit(main(["report", {str(run_dir)!r}]))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 143, done.stdout + done.stderr
    assert "interrupted while writing the report: saved table.md" in done.stdout.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr, done.stderr


def test_write_report_lists_what_it_saved(run_dir, monkeypatch):
    interrupt_while_plotting(monkeypatch, signal.SIGINT)
    saved: list[Path] = []
    with pytest.raises(KeyboardInterrupt):
        write_report(run_dir, records(2, ["p"]), saved=saved)
    assert [p.name for p in saved] == ["table.md", "table.csv", "comparisons.csv", "failures.csv"]
