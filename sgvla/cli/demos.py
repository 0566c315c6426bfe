"""``sgvla demos generate``: scripted-expert demonstrations in LIBERO's HDF5 layout (`sgvla.libero.demos`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def _task_ids(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"task ids are comma-separated integers, got {text!r}") from exc


def add_parser(sub) -> None:
    p = sub.add_parser("demos", help="LIBERO-format demonstrations")
    demos_sub = p.add_subparsers(dest="demos_command", metavar="ACTION", required=True)
    g = demos_sub.add_parser("generate", help="record scripted-expert demos of LIBERO-Spatial tasks (resumable)")
    g.add_argument("--tasks", type=_task_ids, default=list(range(10)),
                   help="comma-separated task ids (default: all 10)")
    g.add_argument("--episodes", type=int, default=50, help="successful demos per task")
    g.add_argument("--out", required=True, help="directory (one <task>_demo.hdf5 per task) or one .hdf5 file")
    g.add_argument("--profile", default="reference", choices=("reference", "fast"), help="render profile")
    g.add_argument("--image-size", type=int, default=128, help="square image size (LIBERO's datasets: 128)")
    g.add_argument("--perturbation", default="none", help="perturbation set name or YAML path")
    g.add_argument("--max-attempts", type=int, default=None, help="seeds to try per task (default: 3 x episodes)")
    g.set_defaults(func=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    from sgvla.libero.demos import generate

    paths = generate(args.tasks, args.episodes, Path(args.out), render_profile=args.profile, image_size=args.image_size,
                     perturbation=args.perturbation, max_attempts=args.max_attempts)
    for path in paths:
        print(path)
    return 0
