"""The `sgvla` command. Each subcommand lives in its own module and registers itself here."""

import argparse
import importlib
import sys

from sgvla import __version__

# name -> module exposing `add_parser(subparsers)`; the parser's `func(args) -> int` runs it.
SUBCOMMANDS = {
    "doctor": "sgvla.doctor",
    "demos": "sgvla.sim.demos",
    "annotate": "sgvla.sim.annotate",
    "eval": "sgvla.eval.runner",
    "report": "sgvla.eval.report",
    "vlm-bench": "sgvla.vlm.bench",
    "vlm-annotate": "sgvla.vlm.annotate",
    "vlm-serve": "sgvla.vlm.server",
    "make-tiny-policy": "sgvla.policies.tiny",
    "record": "sgvla.hardware.record_cli",
    "sim-bus": "sgvla.hardware.sim_bus_cli",
    "launch": "sgvla.launch_cmd",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sgvla", description=__doc__)
    parser.add_argument("--version", action="version", version=f"sgvla {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS.values():
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
