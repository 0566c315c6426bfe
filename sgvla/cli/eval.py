"""``sgvla eval``: run an evaluation plan (resumable), then print its table and write the report."""

from __future__ import annotations

import argparse
import logging
from collections import Counter

from sgvla.cli.arguments import add_overrides_argument
# At parse time: it picks headless rendering before MuJoCo loads.
from sgvla.eval.runner import check_in_process, run_plan, validate
from sgvla.core.config import parse_items


def plan_keys_epilog(width: int = 100) -> str:
    """The plan's keys, one line each with its default, from the plan's declarations (`plan_keys`)."""
    import textwrap

    import sgvla.plugins  # noqa: F401  (the defaults name registered suites and policies)
    from sgvla.core.field_docs import first_sentence
    from sgvla.eval.config import plan_keys

    keys = plan_keys()
    left = max(len(k) for k, _, _ in keys) + 2
    lines = [*textwrap.wrap("The plan's keys, in a plan's YAML or as key=value items. A default is what a plan that "
                            "leaves the key out gets.", width), ""]
    for key, default, meaning in keys:
        text = first_sentence(meaning) + (f" Default: {default}." if default else "")
        lines.extend(textwrap.wrap(text, width, initial_indent=f"  {key:<{left}}", subsequent_indent=" " * (left + 2)))
    return "\n".join(lines)


def add_parser(sub) -> None:
    import argparse

    import textwrap

    description = ("Run every (policy, task, perturbation, mode, seed) of a plan once; rerunning the same command "
                   "resumes. The plan's keys can be overridden by key=value items, e.g. tasks=[0,1] episodes=5.")
    p = sub.add_parser("eval", help="Run a graph-injected policy evaluation (resumable).",
                       description=textwrap.fill(description, 100), epilog=plan_keys_epilog(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="config/eval/default.yaml",
                   help="The evaluation plan (YAML); the shipped plans are in config/eval/.")
    p.add_argument("--workers", type=int, help="How many episodes run side by side, each in a process of its own.")
    p.add_argument("--out", help="The run folder (default: the plan's output_dir).")
    p.add_argument("--new-run", action="store_true",
                   help="Start a new run in the output folder: the run there (records, plan, tables) moves to "
                        "superseded/<time>/ in that folder; nothing is deleted.")
    p.add_argument("--quiet", action="store_true", help="Show no progress bar.")
    add_overrides_argument(p, "Overrides of the plan", "tasks=[0,1] graph_source=vlm "
                                                       "graph_source.client=qwen2_5_vl_7b")
    p.set_defaults(func=run)


def _reasons(outstanding: dict) -> str:
    common = Counter(r["reason"] for r in outstanding.values()).most_common(3)
    return "; ".join(f"{n}x {reason[:200]}" for reason, n in common)


def _partial(summary) -> str:
    """The line heading the report of a run that left planned episodes without a result ("" when it left none)."""
    from sgvla.eval.report import partial_note

    missing = len(summary.outstanding) + summary.not_run
    return partial_note(missing, summary.planned, "failed on infrastructure or not run; rerun the same command to "
                        "run them") if missing else ""


def _summary(*args) -> None:
    """The 100-column summary (`sgvla.eval.terminal_summary`) instead of the wide table, which is in table.md."""
    from sgvla.eval.terminal_summary import terminal_summary

    print(terminal_summary(*args), flush=True)


def run(args: argparse.Namespace) -> int:
    from sgvla.core.interrupts import sigterm_as_interrupt

    with sigterm_as_interrupt():  # SIGTERM stops the run as Ctrl-C does: workers ended, the folder's lock released
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    import sgvla.plugins  # noqa: F401  (plans name registered suites, policies, graph sources, context modes)
    from sgvla.core.config import ConfigError, load_config
    from sgvla.eval.config import EvalConfig
    from sgvla.core.interrupts import exit_code
    import textwrap

    from sgvla.eval.finding import finding
    from sgvla.eval.report import SequentialPlan, interrupted_note, write_report
    from sgvla.eval.results import INFRA_FAILURES, CorruptRecords, RunFolderGone, open_records
    from sgvla.eval.run_dir import RunDirError
    from sgvla.paths import resolve_data_path

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("OpenGL").setLevel(logging.WARNING)  # PyOpenGL's INFO that its optional accelerator is absent
    console = Console()

    def say(text: str, style: str = "bold red") -> None:
        console.print(f"[{style}]{escape(text)}[/]", soft_wrap=True)

    try:
        overrides = parse_items(args.overrides)
        if args.workers is not None:
            overrides["workers"] = args.workers
        if args.out is not None:
            overrides["output_dir"] = args.out
        cfg = load_config(EvalConfig, resolve_data_path(args.config), overrides)
        validate(cfg)
        check_in_process(cfg)
    except (ConfigError, ValueError, FileNotFoundError) as e:
        say(f"sgvla eval: {e}")
        return 2
    try:
        summary = run_plan(cfg, progress=not args.quiet, new_run=args.new_run)
    except (RunDirError, CorruptRecords) as e:
        say(f"sgvla eval: {e}")
        return 2
    except RunFolderGone as e:
        say(f"sgvla eval: stopped: {e}")
        return 1
    except KeyboardInterrupt as e:
        say("sgvla eval: interrupted; every finished episode is recorded: rerun the same command to continue")
        return exit_code(e)
    if summary.superseded is not None:
        say(f"started a new run; the previous run's files are in {summary.superseded}", "bold yellow")
    if summary.complete and not summary.recorded and not summary.infra_failed:  # a resume with nothing left
        say(f"all {summary.planned} episodes already recorded in {summary.path.parent}; nothing to run", "bold")
    saved: list = []
    found: list[str] = []  # what the run found, said last
    try:
        results, infra = open_records(summary.path.parent, writable=False)
        records = list(results.records())
        outstanding_all = infra.outstanding(results)
        if records:
            stored = SequentialPlan.stored(summary.path.parent)
            partial = _partial(summary)
            found = finding(records, [p.display_name for p in cfg.policies if p.reads_goal], cfg.alpha)
            try:
                paths = write_report(summary.path.parent, records, outstanding_all.values(), stored, saved, partial)
                for name, extra in (("plan", "config.yaml"), ("videos", "videos"),
                                    ("infrastructure failures", INFRA_FAILURES)):
                    if (summary.path.parent / extra).exists():  # every output of the run is named
                        paths[name] = summary.path.parent / extra
                _summary(records, outstanding_all.values(), stored, paths["html"], partial)
                console.print(f"records: {summary.path}\n" + "\n".join(f"{k}: {v}" for k, v in paths.items()))
            except OSError as e:
                _summary(records, outstanding_all.values(), stored, None, partial)
                say(f"sgvla eval: cannot write the report into {summary.path.parent}: {e.strerror}")
    except KeyboardInterrupt as e:  # Ctrl-C while the tables or plots are made: one line, not matplotlib's stack
        say(f"sgvla eval: {interrupted_note(summary.path.parent, saved)}")
        return exit_code(e)
    for name, stats in summary.policy_server.items():
        if stats["batches"]:
            console.print(f"policy server: {name}: {stats['steps']} steps in {stats['batches']} forward passes "
                          f"(mean batch {stats['steps'] / stats['batches']:.2f}, sizes {stats['batch_sizes']})")
    for line in found:  # at most 100 columns, as the summary above
        console.print(escape(textwrap.fill(line, 100)), soft_wrap=True)  # wrapped here, not again at 80
    if summary.complete:
        return 0
    if summary.stopped:
        say(f"sgvla eval: stopped: {summary.stopped}")
    need = len(summary.outstanding) + summary.not_run
    parts = [f"{len(summary.outstanding)} failed on infrastructure ({_reasons(summary.outstanding)}; see "
             f"{summary.path.parent / INFRA_FAILURES})"] if summary.outstanding else []
    parts += [f"{summary.not_run} not run"] if summary.not_run else []
    say(f"sgvla eval: {need} of {summary.planned} episode(s) need a rerun: {', '.join(parts)}. They are not in the "
        "table; rerun the same command to run them.")
    return 1
