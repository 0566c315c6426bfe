"""``sgvla fiducial-graphs``: scene graphs of a recorded LeRobot dataset from its objects' fiducial markers
(`sgvla.so101.perception.dataset_graphs`), stored beside it as the reference ``sgvla vlm-bench`` scores against."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("fiducial-graphs", help="reference scene graphs of a recorded dataset from fiducial markers",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", type=Path, help="LeRobot dataset root (as `sgvla record` writes it)")
    p.add_argument("--camera", action="append", default=[], metavar="NAME=CALIBRATION",
                   help="a dataset camera (observation.images.NAME) and its calibration (a name in calibration/ or "
                        "a YAML path, with extrinsics); repeat per camera. Default: every camera of the dataset, "
                        "each with the calibration of its own name")
    p.add_argument("--markers", type=Path, default=None,
                   help="marker config (default config/perception/so101_markers.yaml)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sgvla.core.config import ConfigError
    from sgvla.so101.hardware.calibration import CalibrationError, load_camera_calibration
    from sgvla.so101.perception.dataset_graphs import write_fiducial_graphs
    from sgvla.so101.perception.fiducials import DEFAULT_MARKERS, load_marker_config
    from sgvla.so101.perception.poses import CameraModel

    prefix = "observation.images."
    try:
        info = args.dataset / "meta" / "info.json"
        if not info.is_file():
            raise ValueError(f"{args.dataset}: not a LeRobot dataset (no meta/info.json)")
        features = json.loads(info.read_text())["features"]
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
        path = write_fiducial_graphs(args.dataset, cameras, load_marker_config(args.markers or DEFAULT_MARKERS))
    except (ConfigError, CalibrationError, ValueError) as e:
        print(f"sgvla fiducial-graphs: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0
