"""``sgvla annotate``: ground-truth scene graphs added to a LIBERO-layout HDF5 file (`sgvla.libero.annotate`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("annotate", help="add ground-truth scene graphs to a LIBERO-layout HDF5 file (resumable)")
    p.add_argument("input", help="LIBERO-layout HDF5 file (never modified unless --out names it)")
    p.add_argument("--out", help="output file (default: replace the input atomically when done)")
    p.add_argument("--image-size", type=int, default=None, help="box image size when the file stores no images")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sgvla.libero.annotate import annotate_file, graph_stats
    from sgvla.libero.hdf5 import VIEWS

    out = Path(args.out) if args.out else Path(args.input)
    annotate_file(args.input, out, image_size=args.image_size)
    stats = graph_stats(out)
    means = ", ".join(f"{v} {stats.triplets_per_frame[v]:.2f}" for v in VIEWS)
    print(f"{out}: {stats.demos} demos, {stats.frames} frames; mean triplets/frame: {means}")
    return 0
