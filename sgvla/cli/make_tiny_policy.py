"""``sgvla make-tiny-policy``: save a tiny random-weight LeRobot policy (offline; `sgvla.policies.tiny`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sgvla.policies import tiny


def add_parser(sub) -> None:
    p = sub.add_parser("make-tiny-policy", help="Save a tiny random-weight LeRobot policy (offline).",
                       description=tiny.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("type", choices=sorted(tiny.BUILDERS), help="The LeRobot policy type to build.")
    p.add_argument("out_dir", type=Path, help="The folder to save the policy in, as a checkpoint folder.")
    p.add_argument("--seed", type=int, default=0, help="Seed of the random weights (default 0).")
    p.add_argument("--dataset", type=Path, default=None,
                   help="A local LeRobot dataset folder (e.g. SO101 data from sgvla record or sgvla demos generate "
                        "--suite so101_twin): its features and stats instead of LIBERO's.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        path = tiny.BUILDERS[args.type](args.out_dir, seed=args.seed, dataset=args.dataset)
    except (ValueError, FileNotFoundError) as e:  # a dataset pi0/pi05 cannot take, a folder that is no dataset
        print(f"sgvla make-tiny-policy: {e}")
        return 2
    # sgvla's own syntax (a policies entry of the plan), as `sgvla eval` takes it; LeRobot's tools take the folder
    # as --policy.path as for any checkpoint.
    print(f"{args.type} policy saved to {path}; evaluate it with: sgvla eval "
          f"'policies=[{{type: {args.type}, path: {Path(path).absolute()}, device: cpu}}]'")
    return 0
