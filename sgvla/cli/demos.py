"""``sgvla demos generate`` records scripted-expert demonstrations of a registered suite, in the suite's own format
(`SuiteConfig.generate_demos`): ``--suite libero_spatial`` (default) LIBERO's HDF5 layout; ``--suite so101_twin`` a
LeRobot dataset of the SO101 twin, with the features `sgvla record` writes on the arm, ready for ``lerobot-train``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _task_ids(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"task ids are comma-separated integers, got {text!r}") from exc




def _image_size(text: str) -> tuple[int, int]:
    """``N`` (square) or ``WxH``."""
    try:
        parts = [int(p) for p in text.lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2):
        raise argparse.ArgumentTypeError(f"image size is N or WIDTHxHEIGHT (e.g. 128 or 64x48), got {text!r}")
    return (parts[0], parts[-1])


def add_parser(sub) -> None:
    p = sub.add_parser("demos", help="Scripted-expert demonstrations: LIBERO's HDF5 files or a LeRobot dataset.",
                       description="Scripted-expert demonstrations; `sgvla demos generate --help` says how they "
                                   "are made and stored.")
    demos_sub = p.add_subparsers(dest="demos_command", metavar="ACTION", required=True)
    g = demos_sub.add_parser("generate", help="Record scripted-expert demos of LIBERO-Spatial or SO101-twin tasks "
                                              "(resumable).", description=__doc__)
    g.add_argument("--suite", default="libero_spatial",
                   help="A registered suite that writes demos: libero_spatial (LIBERO HDF5 files), so101_twin (one "
                        "LeRobot dataset, as sgvla record writes).")
    g.add_argument("--tasks", type=_task_ids, default=None,
                   help="Comma-separated task ids (default: all of the suite's).")
    g.add_argument("--episodes", type=int, default=50, help="Successful demos per task.")
    g.add_argument("--out", required=True, help="For libero_spatial, a directory (one <task>_demo.hdf5 per task) or "
                                                "one HDF5 file; for so101_twin, the dataset folder (created, or "
                                                "resumed).")
    g.add_argument("--profile", default="reference", choices=("reference", "fast"),
                   help="The render profile of libero_spatial.")
    g.add_argument("--image-size", type=_image_size, default=None,
                   help="N or WIDTHxHEIGHT (libero_spatial: square, default 128; so101_twin: default 128x96).")
    g.add_argument("--max-steps", type=int, default=None,
                   help="For so101_twin, the control steps before an episode fails.")
    g.add_argument("--perturbation", default="none", help="Perturbation set name or YAML path.")
    g.add_argument("--max-attempts", type=int, default=None, help="Seeds to try per task (default: 3 x episodes).")
    g.set_defaults(func=run_generate)


def _demo_suites() -> dict[str, type]:
    """The registered suites that write demos."""
    import sgvla.plugins  # noqa: F401  (registers the suites)
    from sgvla.eval.suite import SuiteConfig

    return {name: cls for name, cls in SuiteConfig.choices().items() if cls.demo_image_size is not None}


def run_generate(args: argparse.Namespace) -> int:
    import logging

    suites = _demo_suites()
    if args.suite not in suites:
        print(f"sgvla demos generate: suite {args.suite!r} writes no demos; choose from {sorted(suites)}",
              file=sys.stderr)
        return 2
    cls = suites[args.suite]
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        suite = cls(render_profile=args.profile) if "render_profile" in cls.__dataclass_fields__ else cls()
        paths = suite.generate_demos(list(cls.tasks) if args.tasks is None else args.tasks, args.episodes,
                                     Path(args.out), image_size=args.image_size or cls.demo_image_size,
                                     perturbation=args.perturbation, max_attempts=args.max_attempts,
                                     max_steps=args.max_steps)
    except (ValueError, RuntimeError) as exc:
        print(f"sgvla demos generate: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0
