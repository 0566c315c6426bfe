"""``sgvla vlm-annotate``: VLM scene graphs for sampled frames of a LeRobot dataset (e.g. SO101
teleoperation recordings), written beside it in the versioned format of :mod:`sgvla.vlm.resource`.
Resumable: frames already answered are skipped.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

from sgvla.core.config import ConfigError
from sgvla.scene_graph.ontology import load_ontology
from sgvla.vlm.bench import Timer, add_common_arguments, client_configs, query_missing, slug
from sgvla.vlm.cache import AnswerCache
from sgvla.vlm.frames import LeRobotSource, Sampling
from sgvla.vlm.prompts import canonical_camera, load_prompt
from sgvla.vlm.resource import FOLDER, write_meta


def add_parser(sub) -> None:
    p = sub.add_parser("vlm-annotate", help="write VLM scene graphs beside a LeRobot dataset", description=__doc__)
    p.add_argument("dataset", help="root folder of a local LeRobot dataset")
    add_common_arguments(p)
    p.add_argument("--ontology", default="so101_tabletop")
    p.add_argument("--camera", action="append", default=[], metavar="KEY=VIEW",
                   help="camera feature and its view, e.g. observation.images.wrist=robot0_eye_in_hand "
                        "(default: every camera; 'wrist' in the key means the wrist view)")
    p.add_argument("--rotate-180", action="store_true", help="turn images upside down before querying")
    p.add_argument("--episodes-per-task", type=int, default=0)
    p.add_argument("--out", help=f"output folder (default: DATASET/{FOLDER}/<model>__<prompt>__<constraint>)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ontology = load_ontology(args.ontology)
    prompt = load_prompt(args.prompt)
    try:
        configs = client_configs(args, ontology)
    except ConfigError as e:
        print(f"sgvla vlm-annotate: {e}", file=sys.stderr)
        return 2
    cameras = {}
    for item in args.camera:
        key, sep, view = item.partition("=")
        if not sep:
            raise SystemExit(f"--camera {item!r}: expected KEY=VIEW")
        cameras[key] = canonical_camera(view)
    source = LeRobotSource(args.dataset, cameras or None, rotate=args.rotate_180)
    sampling = Sampling(args.episodes_per_task, args.frames_per_episode, args.seed)
    frames = sampling.sample([source], source.cameras)
    for config in configs:
        folder = Path(args.out) if args.out else (
            Path(args.dataset) / FOLDER / f"{slug(config.name)}__{prompt.label}__{config.constraint}")
        write_meta(folder, source.name, config, prompt, ontology, source.keys, asdict(sampling))
        with AnswerCache(folder / "graphs.jsonl") as cache:
            asked = query_missing(frames, {source.name: source}, config, prompt, ontology, cache, Timer(),
                                  args.chunk, not args.no_progress)
            failed = sum(bool(cache.records[f.key].get("error")) for f in frames)
        print(f"{config.name}: {len(frames)} frame graphs in {folder} ({asked} queried now, {failed} failed)")
    return 0
