"""``sgvla merge``: the run folders of a plan's shards (``sgvla eval ... shard=i/N``, e.g. the jobs of a SLURM
array) joined into one run of the whole plan, with the table, CSV and plot that ``sgvla eval`` writes."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("merge", help="Join the run folders of a plan's shards into one run and its table.",
                       description="Join the run folders of the N shards of one plan (sgvla eval ... shard=i/N "
                                   "--out DIR) into OUT: the plan (shard 0/1), every record in plan order, the "
                                   "outstanding infrastructure failures, and the report sgvla eval writes. Refused, "
                                   "with nothing written, when the folders hold different plans, a shard twice, an "
                                   "episode twice or outside the plan, or when episodes are missing (unless "
                                   "--allow-missing).")
    p.add_argument("out", metavar="OUT", help="Folder for the merged run: new, or empty.")
    p.add_argument("shard_dirs", nargs="+", metavar="SHARD_DIR", help="The shards' run folders, in any order.")
    p.add_argument("--allow-missing", action="store_true",
                   help="Merge what is there when episodes or whole shards are missing, and say which.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    import sgvla.plugins  # noqa: F401  (stored plans name registered suites, policies, graph sources, context modes)
    from sgvla.eval.report import SequentialPlan, write_report
    from sgvla.eval.results import RESULTS, open_records
    from sgvla.eval.run_dir import PLAN
    from sgvla.eval.shards import MergeError, check_out, listed, merge_shards, partial_merge, write_merged
    from sgvla.eval.terminal_summary import terminal_summary

    console = Console()

    def say(text: str, style: str = "bold red") -> None:
        console.print(f"[{style}]{escape(text)}[/]", soft_wrap=True)

    out = Path(args.out)
    try:
        check_out(out)  # before reading the shards, which can take a while
        merged = merge_shards(args.shard_dirs, allow_missing=args.allow_missing)
        written = write_merged(out, merged)
    except MergeError as e:
        say(f"sgvla merge: {e}")
        return 2
    except OSError as e:
        say(f"sgvla merge: cannot write the merged run into {out}: {e}")
        return 2
    console.print(escape(f"merged {len(args.shard_dirs)} folder(s), {len(merged.records)} episode record(s), "
                         f"into {out}"))
    if merged.missing:
        say(f"sgvla merge: --allow-missing: {len(merged.missing)} episode(s) of the plan are missing and not in the "
            "table:" + listed(merged.missing) + "\nRerunning a shard's command resumes it; then merge again into a "
            "new folder.", "bold yellow")
    # The report, as `sgvla eval` writes it after a run, from the merged folder's records.
    results, infra = open_records(out, writable=False)
    records = list(results.records())
    outstanding = infra.outstanding(results)
    if not records:
        say(f"sgvla merge: no episode records in the shards, so no table; the plan is in {written[PLAN]}",
            "bold yellow")
        return 0
    stored = SequentialPlan.stored(out)
    partial = partial_merge(out, records)  # said at the top of table.md and report.html too
    try:
        paths = write_report(out, records, outstanding.values(), stored, partial=partial)
    except OSError as e:
        print(terminal_summary(records, outstanding.values(), stored, None, partial), flush=True)
        say(f"sgvla merge: cannot write the report into {out}: {e.strerror}")
        return 2
    print(terminal_summary(records, outstanding.values(), stored, paths["html"], partial), flush=True)
    console.print("\n".join(f"{k}: {v}" for k, v in {"records": written[RESULTS], **paths}.items()))
    return 0
