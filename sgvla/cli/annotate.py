"""``sgvla annotate INPUT`` stores scene graphs of a dataset, by what the input is.

- A LeRobot dataset folder (``meta/info.json``; as ``sgvla record`` or ``sgvla demos generate --suite so101_twin``
  write it): each episode is replayed through the fiducial perception, and the perceived object poses and each
  camera's graph of every frame are stored beside the dataset (`sgvla.so101.perception.annotations`; reload them
  with ``load_annotations``); the graphs are its ``fiducial`` reference graphs, which ``sgvla vlm-bench`` scores
  against. Resumable: episodes already stored are kept.
- A LIBERO-layout HDF5 file: ground-truth graphs added from its recorded simulator states (`sgvla.libero.annotate`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

def add_parser(sub) -> None:
    p = sub.add_parser("annotate", help="Scene graphs (and, for a LeRobot dataset, perceived object poses) of a "
                       "dataset, stored with it (resumable).", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", type=Path, help="A LeRobot dataset folder, or a LIBERO-layout HDF5 file.")
    lerobot = p.add_argument_group("LeRobot dataset")
    lerobot.add_argument("--camera", action="append", default=[], metavar="NAME=CALIBRATION",
                         help="A dataset camera (observation.images.NAME) and its calibration (a name in "
                              "calibration/ or a YAML path, with extrinsics); repeat per camera. Default: every "
                              "camera of the dataset, each with the calibration of its own name.")
    lerobot.add_argument("--markers", type=Path, default=None,
                         help="Marker config (default config/perception/so101_markers.yaml).")
    lerobot.add_argument("--redo", action="store_true",
                         help="Annotate every episode anew (needed to change the cameras or marker config).")
    libero = p.add_argument_group("LIBERO-layout HDF5 file")
    libero.add_argument("--out", help="Output file (default: replace the input atomically when done; the input is "
                                      "never modified unless --out names it).")
    libero.add_argument("--image-size", type=int, default=None, help="Box image size when the file stores no images.")
    p.set_defaults(func=run)


def input_kind(path: Path) -> str:
    """``lerobot`` or ``hdf5``; a ValueError naming what was expected otherwise."""
    expected = "a LeRobot dataset folder (with meta/info.json) or a LIBERO-layout HDF5 file"
    if path.is_dir():
        if (path / "meta" / "info.json").is_file():
            return "lerobot"
        raise ValueError(f"{path}: a folder without meta/info.json is no LeRobot dataset; expected {expected}")
    if not path.exists():
        raise ValueError(f"{path}: no such file or folder; expected {expected}")
    import h5py

    if not h5py.is_hdf5(path):
        raise ValueError(f"{path}: not an HDF5 file; expected {expected}")
    return "hdf5"


def run(args: argparse.Namespace) -> int:
    try:
        kind = input_kind(args.input)
        misplaced = ([f for f, v in (("--out", args.out), ("--image-size", args.image_size)) if v is not None]
                     if kind == "lerobot" else
                     [f for f, v in (("--camera", args.camera), ("--markers", args.markers), ("--redo", args.redo))
                      if v])
        if misplaced:
            what = "a LeRobot dataset" if kind == "lerobot" else "an HDF5 file"
            raise ValueError(f"{' '.join(misplaced)}: not options for {what} (see sgvla annotate --help)")
        return annotate_lerobot(args) if kind == "lerobot" else annotate_hdf5(args)
    except (ValueError, OSError) as e:  # bad input or settings: a message, no traceback
        print(f"sgvla annotate: {e}", file=sys.stderr)
        return 2


def annotate_hdf5(args: argparse.Namespace) -> int:
    from sgvla.libero.annotate import annotate_file, graph_stats
    from sgvla.libero.hdf5 import VIEWS

    out = Path(args.out) if args.out else args.input
    annotate_file(args.input, out, image_size=args.image_size)
    stats = graph_stats(out)
    means = ", ".join(f"{v} {stats.triplets_per_frame[v]:.2f}" for v in VIEWS)
    print(f"{out}: {stats.demos} demos, {stats.frames} frames; mean triplets/frame: {means}")
    return 0


def annotate_lerobot(args: argparse.Namespace) -> int:
    from sgvla.core.config import ConfigError
    from sgvla.so101.hardware.calibration import CalibrationError, load_camera_calibration
    from sgvla.so101.perception.annotations import annotate_dataset
    from sgvla.so101.perception.fiducials import DEFAULT_MARKERS, load_marker_config
    from sgvla.so101.perception.poses import CameraModel

    prefix = "observation.images."
    info = args.input / "meta" / "info.json"
    try:
        features = json.loads(info.read_text())["features"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(f"{info}: not a LeRobot dataset's info (JSON with its features)") from None
    try:
        shapes = {k.removeprefix(prefix): v["shape"] for k, v in features.items()
                  if k.startswith(prefix) and not k.endswith("_depth")}
        pairs = dict(item.partition("=")[::2] for item in args.camera) or {name: name for name in shapes}
        bad = [name for name, file in pairs.items() if name not in shapes or not file]
        if bad:
            raise ValueError(f"--camera {bad}: expected NAME=CALIBRATION with NAME one of the dataset's cameras "
                             f"{sorted(shapes)}")
        cameras = {}
        for name, file in pairs.items():
            height, width = shapes[name][:2]
            cameras[name] = CameraModel.from_calibration(load_camera_calibration(file), int(width), int(height))
        markers = load_marker_config(args.markers or DEFAULT_MARKERS)
    except (ConfigError, CalibrationError) as e:
        raise ValueError(str(e)) from None
    done = annotate_dataset(args.input, cameras, markers, redo=args.redo,
                            progress=lambda episode, frames: print(f"episode {episode}: {frames} frames",
                                                                   file=sys.stderr))
    print(f"{args.input}: annotated {len(done.annotated)} episode(s) ({done.frames} frames), {len(done.stored)} "
          f"already stored; poses and graphs in {done.folder}")
    return 0
