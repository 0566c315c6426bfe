"""The `sgvla` command. Each subcommand is one module of this package, which registers its parser here and is run
from here; the library modules it calls hold no argument parsing and print nothing meant for the terminal. Only
the command that runs is imported (`sgvla doctor` loads no simulator, no torch). Bare `sgvla` prints how to start."""

import argparse
import contextlib
import faulthandler
import importlib
import sys

from sgvla import __version__

DESCRIPTION = ("Does telling a vision-language-action policy where things are (a spatial scene graph) change what it "
               "does? sgvla evaluates policies with and without a live scene graph in their prompt, in simulation "
               "and on the SO101 arm.")

# name -> module of sgvla.cli exposing `add_parser(subparsers)`; the parser's `func(args) -> int` runs it.
SUBCOMMANDS = {
    "doctor": "doctor",
    "demos": "demos",
    "annotate": "annotate",
    "eval": "eval",
    "report": "report",
    "merge": "merge",
    "compare": "compare",
    "vlm-bench": "vlm_bench",
    "vlm-annotate": "vlm_annotate",
    "vlm-serve": "vlm_serve",
    "make-tiny-policy": "make_tiny_policy",
    "make-tiny-vlm": "make_tiny_vlm",
    "record": "record",
    "sim-bus": "sim_bus",
    "launch": "launch",
    "calibrate": "calibrate",
    "markers": "markers",
    "bag2dataset": "bag2dataset",
}


class Parser(argparse.ArgumentParser):
    """argparse's parser, its -h option in a sentence of ours (argparse's reads "show this help message and exit").
    Sub-commands' parsers are of the class of their parent, so every `--help` of sgvla gets it."""

    def __init__(self, *args, add_help: bool = True, **kwargs):
        super().__init__(*args, add_help=False, **kwargs)
        if add_help:
            self.add_argument("-h", "--help", action="help", help="Show this help and exit.")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of one subcommand (its module alone is imported, so `sgvla doctor` does not load
    the simulator), or of all of them for the overview help."""
    parser = Parser(prog="sgvla", description=DESCRIPTION,
                    epilog="Run `sgvla` alone for the first commands and the shipped plans; "
                           "`sgvla COMMAND --help` explains each command.")
    parser.add_argument("--version", action="version", version=f"sgvla {__version__}",
                        help="Print sgvla's version and exit.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        if command is None or name == command:
            importlib.import_module(f"{__name__}.{module}").add_parser(sub)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The arguments, with `key=value` items allowed anywhere among the options of a command that takes them
    (argparse alone takes a positional list only in one piece)."""
    args, extra = parser.parse_known_args(argv)
    takes_items = isinstance(getattr(args, "overrides", None), list)
    if extra and takes_items and not any(e.startswith("-") for e in extra):
        args.overrides = [*args.overrides, *extra]
    elif takes_items and "--set" in extra:
        parser.error(f"{args.command} --set: key=value items need no flag; drop --set and keep the items")
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def getting_started(width: int = 100) -> str:
    """What bare `sgvla` prints: the main job, the shipped plans (each file's first comment line), where results go."""
    import textwrap

    from sgvla.core.field_docs import first_sentence
    from sgvla.paths import CONFIG_DIR

    plans = []
    for path in sorted((CONFIG_DIR / "eval").glob("*.yaml")):
        head = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                break
            head.append(line.lstrip("#").strip())
        plans.append((f"config/eval/{path.name}", first_sentence(" ".join(head), limit=width)))
    left = max(len(name) for name, _ in plans) + 4
    lines = [textwrap.fill(DESCRIPTION, width), "",
             "Start here (after `make install`, in a shell where `source .venv/bin/activate` has run):",
             "  sgvla doctor                 checks this machine: simulators, ROS 2, LeRobot, devices",
             "  sgvla eval                   runs the main job (config/eval/default.yaml), as `make eval` does",
             "  sgvla eval --config PLAN     runs a shipped plan or your own; `sgvla eval --help` lists its keys",
             "", "Shipped plans:"]
    for name, summary in plans:
        lines.extend(textwrap.wrap(summary, width, initial_indent=f"  {name:<{left - 2}}",
                                   subsequent_indent=" " * left))
    lines += ["", textwrap.fill("Results go to the plan's output_dir (outputs/eval for the main job): episodes.jsonl "
                                "(one record per episode, written as it ends; a rerun resumes), table.md and "
                                "table.csv, comparisons.csv, the plots, and videos/ when video=true.", width),
              "", "Every command: sgvla --help. Each command's options: sgvla COMMAND --help."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(getting_started())
        return 0
    if argv and argv[0] in SUBCOMMANDS:
        parser = build_parser(argv[0])
    else:  # the overview (help, errors) lists every command; --version needs none of them
        parser = build_parser("" if argv[:1] == ["--version"] else None)
    args = parse(parser, argv)
    if args.command is None:  # options only (`sgvla --verbose`): what the command line lacks
        parser.print_help()
        return 2
    # A crash in native code (a renderer, a DDS thread) prints every thread's Python stack, so a run that dies by
    # a signal says where (a `sgvla record` on the twin once ended by SIGSEGV in Mesa with nothing else said).
    with contextlib.suppress(OSError, ValueError, AttributeError):  # stderr without a file descriptor (captured)
        faulthandler.enable()
    return args.func(args)
