"""``sgvla vlm-annotate`` writes VLM scene graphs for sampled frames of a LeRobot dataset (e.g. SO101
teleoperation recordings) beside it, in the versioned format of `sgvla.vlm.resource`. Resumable: frames already
answered are skipped.
"""

from __future__ import annotations

import argparse
import sys

from sgvla.cli.arguments import add_overrides_argument
from sgvla.cli.vlm_bench import CLIENT_OVERRIDES, add_client_arguments
from sgvla.core.config import ConfigError
from sgvla.core.config import parse_items


def add_parser(sub) -> None:
    from sgvla.vlm.resource import FOLDER

    p = sub.add_parser("vlm-annotate", help="Write VLM scene graphs beside a LeRobot dataset.", description=__doc__)
    p.add_argument("dataset", help="Root folder of a local LeRobot dataset.")
    add_overrides_argument(p, *CLIENT_OVERRIDES)
    add_client_arguments(p)
    p.add_argument("--ontology", default="so101_tabletop",
                   help="The objects and relations the VLM is asked about: a name in config/ontology/ (default "
                        "so101_tabletop).")
    p.add_argument("--camera", action="append", default=[], metavar="KEY=VIEW",
                   help="Camera feature and the prompt camera (or alias) it is, e.g. observation.images.top=agent "
                        "(default: every camera; 'wrist' in the key means the wrist view).")
    p.add_argument("--rotate-180", action="store_true", help="Turn images upside down before querying.")
    p.add_argument("--episodes-per-task", type=int, default=0, help="Episodes sampled per task (0: all).")
    p.add_argument("--out", help=f"Output folder (default: DATASET/{FOLDER}/<model>__<prompt>__<constraint>).")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sgvla.scene_graph.ontology import load_ontology
    from sgvla.vlm.annotate import annotate_dataset
    from sgvla.vlm.bench import load_clients
    from sgvla.vlm.frames import Sampling
    from sgvla.vlm.prompts import canonical_camera, load_prompt

    ontology = load_ontology(args.ontology)
    prompt = load_prompt(args.prompt)
    try:
        configs = load_clients(args.client, parse_items(args.overrides), ontology)
    except ConfigError as e:
        print(f"sgvla vlm-annotate: {e}", file=sys.stderr)
        return 2
    cameras = {}
    for item in args.camera:
        key, sep, view = item.partition("=")
        if not sep:
            raise SystemExit(f"--camera {item!r}: expected KEY=VIEW")
        cameras[key] = canonical_camera(view, prompt)
    sampling = Sampling(args.episodes_per_task, args.frames_per_episode, args.seed)
    for done in annotate_dataset(args.dataset, configs, prompt, ontology, sampling, cameras, args.rotate_180, args.out,
                                 args.chunk, not args.no_progress):
        print(f"{done.model}: {done.frames} frame graphs in {done.folder} ({done.queried} queried now, "
              f"{done.failed} failed)")
    return 0
