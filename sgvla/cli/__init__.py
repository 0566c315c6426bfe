"""The `sgvla` command. Each subcommand is one module of this package, which registers its parser here and runs it;
the library modules it calls hold no argument parsing and print nothing meant for the terminal. Only the command
that runs is imported (`sgvla doctor` loads no simulator, no torch)."""

import argparse
import contextlib
import faulthandler
import importlib
import sys

from sgvla import __version__

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


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of one subcommand (its module alone is imported, so `sgvla doctor` does not load
    the simulator), or of all of them for the overview help."""
    parser = argparse.ArgumentParser(prog="sgvla", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"sgvla {__version__}")
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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SUBCOMMANDS:
        parser = build_parser(argv[0])
    else:  # the overview (help, errors) lists every command; --version needs none of them
        parser = build_parser("" if argv[:1] == ["--version"] else None)
    args = parse(parser, argv)
    if args.command is None:
        parser.print_help()
        return 2
    # A crash in native code (a renderer, a DDS thread) prints every thread's Python stack, so a run that dies by
    # a signal says where (a `sgvla record` on the twin once ended by SIGSEGV in Mesa with nothing else said).
    with contextlib.suppress(OSError, ValueError, AttributeError):  # stderr without a file descriptor (captured)
        faulthandler.enable()
    return args.func(args)
