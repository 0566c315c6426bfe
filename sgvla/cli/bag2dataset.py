"""``sgvla bag2dataset BAG --contract NAME|FILE --out DIR`` turns a rosbag2 recording (MCAP or sqlite3; any, not
only sgvla's) into a LeRobot dataset, by a contract (`config/contracts/`): which topics are which features, at which fps,
which episodes. Prints the alignment report (per feature: messages, ticks filled, late, missing, the oldest value
used) and saves it beside the dataset (`DIR/bag2dataset_report.json`)."""

from __future__ import annotations

import argparse
import sys
import textwrap
import time

from sgvla.core.config import SYNTAX


def add_parser(sub) -> None:
    p = sub.add_parser("bag2dataset", help="A rosbag2 recording into a LeRobot dataset, by a contract.",
                       description=textwrap.fill(" ".join(__doc__.replace("``", "`").split()) + " Each frame takes, "
                       "for each feature, the newest message at or before its tick (never a later one); ticks with a "
                       "feature missing or late are counted in the report, never filled silently.", 100),
                       epilog="Examples:\n  sgvla bag2dataset runs/bag --contract hardware --out data/twin\n"
                              "  sgvla bag2dataset my.bag --contract plain_so101 --out data/so101 fps=15 "
                              "stamps=receive\n  sgvla bag2dataset runs/bag --contract my_contract.yaml --out d "
                              "--repo-id me/so101",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bag", metavar="BAG", help="A rosbag2 folder (metadata.yaml and .mcap or .db3 files), or its "
                   "storage file; one cut short (no metadata.yaml, an MCAP file without its end, a sqlite3 file "
                   "caught mid-write) is read up to its last complete message, and the report says where it ends.")
    p.add_argument("--contract", required=True, metavar="NAME|FILE",
                   help="A shipped contract's name (config/contracts/NAME.yaml: hardware, so101_eval, "
                        "so101_eval_sim, plain_so101) or a YAML file.")
    p.add_argument("--out", required=True, metavar="DIR", help="The dataset folder to create (must not exist).")
    p.add_argument("--repo-id", default="local/bag2dataset", help="The dataset's repo id (default: %(default)s).")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help=f"Changes to the contract's top-level and nested keys (fps=15, late=keep); {SYNTAX}.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sgvla.core.config import ConfigError, parse_items
    from sgvla.nodegraph.bag2dataset import BagError, convert
    from sgvla.nodegraph.bag_contract import load_contract

    began = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - began:6.1f} s] {text}", flush=True)

    try:
        if Path(args.out).exists():
            raise FileExistsError(f"--out {args.out} exists; bag2dataset writes a new dataset folder")
        contract = load_contract(args.contract, parse_items(args.overrides))
        say(f"contract {contract.source}: {len(contract.features)} features at {contract.fps} fps, episodes by "
            f"{contract.episodes.by}")
        report = convert(args.bag, contract, args.out, repo_id=args.repo_id, progress=say)
    except (ConfigError, BagError, FileExistsError, FileNotFoundError) as e:
        print(f"sgvla bag2dataset: {e}", file=sys.stderr)
        return 2
    print(report.table())
    print(f"dataset {args.out} ({args.repo_id}); report {Path(args.out) / 'bag2dataset_report.json'}")
    return 0
