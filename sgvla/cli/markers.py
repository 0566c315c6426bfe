"""``sgvla markers``: the printable sheet of the objects' ArUco markers, at true scale, with a placement guide."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("markers", help="Print the objects' fiducial markers at true scale.",
                       description="Writes the markers of a marker config (default: "
                                   "config/perception/so101_markers.yaml) at true scale, each with its object, id "
                                   "and where it goes on the object. Print at 100%% (no 'fit to page').")
    p.add_argument("--config", type=Path, default=None,
                   help="Marker config (YAML; default config/perception/so101_markers.yaml).")
    p.add_argument("--out", type=Path, default=Path("markers.pdf"),
                   help="Output file: .pdf (one page per sheet) or .png (one file per page); default markers.pdf.")
    p.add_argument("--dpi", type=int, default=300, help="Dots per inch of the pages (default 300).")
    p.add_argument("--paper", choices=("a4", "letter"), default="a4", help="Paper size (default a4).")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sgvla.core.config import ConfigError
    from sgvla.so101.perception.fiducials import DEFAULT_MARKERS, load_marker_config
    from sgvla.so101.perception.sheet import write_sheets

    try:
        config = load_marker_config(args.config or DEFAULT_MARKERS)
        paths = write_sheets(config, args.out, args.dpi, args.paper)
    except (ConfigError, ValueError) as e:
        print(f"sgvla markers: {e}", file=sys.stderr)
        return 2
    count = sum(len(o.markers) for o in config.objects.values())
    for path in paths:
        print(path)
    print(f"{count} markers of {len(config.objects)} objects at {args.dpi} dpi on {args.paper}: print at 100% scale")
    return 0
