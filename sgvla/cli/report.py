"""``sgvla report`` writes the tables, plots and report.html of an evaluation run again, from its JSONL records
alone; the terminal gets the 100-column summary (`sgvla.eval.terminal_summary`), the wide table is in table.md."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="Tables and plot of an evaluation run, from its JSONL records.",
                       description=__doc__)
    p.add_argument("run_dir", help="Directory holding episodes.jsonl.")
    p.add_argument("--out", help="Where to write table.md, table.csv, comparisons.csv, failures.csv (records with "
                                 "failure classes), success.png and progress.png (records with progress) and "
                                 "report.html (default: run_dir).")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sgvla.core.interrupts import exit_code, sigterm_as_interrupt

    saved: list = []
    with sigterm_as_interrupt():
        try:
            return _run(args, saved)
        except KeyboardInterrupt as e:  # Ctrl-C while the tables or plots are made: one line, not matplotlib's stack
            from sgvla.eval.report import interrupted_note

            print(f"sgvla report: {interrupted_note(Path(args.run_dir), saved)}", flush=True)
            return exit_code(e)


def _run(args: argparse.Namespace, saved: list) -> int:
    from rich.console import Console
    from rich.markup import escape

    from sgvla.eval.report import SequentialPlan, infra_note, write_report
    from sgvla.eval.results import INFRA_FAILURES, RESULTS, CorruptRecords, open_records
    from sgvla.eval.shards import MergeError, partial_merge
    from sgvla.eval.terminal_summary import terminal_summary

    console = Console()

    def fail(text: str) -> int:
        console.print(f"[bold red]sgvla report: {escape(text)}[/]", soft_wrap=True)
        return 2

    run_dir = Path(args.run_dir)
    if not (run_dir / RESULTS).is_file() and not (run_dir / INFRA_FAILURES).is_file():
        return fail(f"no {RESULTS} in {run_dir}")
    try:
        results, infra = open_records(run_dir, writable=False)  # a report never changes the records
    except CorruptRecords as e:
        return fail(str(e))
    except OSError as e:
        return fail(f"cannot read the records in {run_dir}: {e.strerror}")
    try:
        plan = SequentialPlan.stored(run_dir)  # alpha and the planned pairs of the sequential test
    except ValueError as e:
        return fail(str(e))
    records, outstanding = list(results.records()), list(infra.outstanding(results).values())
    if not records:
        note = f". {infra_note(outstanding)}" if outstanding else ""
        return fail(f"{run_dir}: no episode records to report{note}")
    try:
        partial = partial_merge(run_dir, records)
    except MergeError as e:
        return fail(str(e))
    out = Path(args.out) if args.out else run_dir
    try:
        paths = write_report(out, records, outstanding, plan, saved, partial, records_dir=run_dir)
    except ValueError as e:  # records that do not fit the stored plan (more pairs than it holds): before any file
        return fail(f"{run_dir}: {e}")
    except OSError as e:
        print(terminal_summary(records, outstanding, plan, None, partial), flush=True)
        return fail(f"cannot write the report files into {out}: {e.strerror}; the summary is above, or pass "
                    "--out DIR to write them elsewhere")
    print(terminal_summary(records, outstanding, plan, paths["html"], partial), flush=True)
    console.print("\n".join(f"{k}: {v}" for k, v in paths.items()))
    return 0
