"""The `sgvla` command. Each subcommand lives in its own module and registers itself here."""

import argparse
import importlib
import sys

from sgvla import __version__

# name -> module exposing `add_parser(subparsers)`; the parser's `func(args) -> int` runs it.
SUBCOMMANDS = {
    "doctor": "sgvla.cli.doctor",
    "demos": "sgvla.libero.demos",
    "annotate": "sgvla.libero.annotate",
    "eval": "sgvla.eval.runner",
    "report": "sgvla.eval.report",
    "vlm-bench": "sgvla.vlm.bench",
    "vlm-annotate": "sgvla.vlm.annotate",
    "vlm-serve": "sgvla.vlm.server",
    "make-tiny-policy": "sgvla.policies.tiny",
    "record": "sgvla.cli.record",
    "sim-bus": "sgvla.cli.sim_bus",
    "launch": "sgvla.launch.run",
    "calibrate": "sgvla.cli.calibrate",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of one subcommand (its module alone is imported, so `sgvla doctor` does not load
    the simulator), or of all of them for the overview help."""
    parser = argparse.ArgumentParser(prog="sgvla", description=__doc__)
    parser.add_argument("--version", action="version", version=f"sgvla {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        if command is None or name == command:
            importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SUBCOMMANDS:
        parser = build_parser(argv[0])
    else:  # the overview (help, errors) lists every command; --version needs none of them
        parser = build_parser("" if argv[:1] == ["--version"] else None)
    args = parser.parse_args(argv)
    import sgvla.plugins  # noqa: F401  (plans name registered suites, policies, graph sources, context modes)

    if args.command is None:
        parser.print_help()
        return 2
    return args.func(args)
