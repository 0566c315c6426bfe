"""``sgvla vlm-serve``: a local VLM behind a minimal OpenAI-compatible chat endpoint (`sgvla.vlm.server`)."""

from __future__ import annotations

import argparse
import sys

from sgvla.vlm import server


def add_parser(sub) -> None:
    p = sub.add_parser("vlm-serve", help="serve a local VLM on an OpenAI-compatible endpoint (loopback only)",
                       description=server.__doc__)
    p.add_argument("model", help="model directory or hub id (loaded with AutoModelForImageTextToText)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--name", default="", help="model name reported to clients (default: directory name)")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--max-image-bytes", type=int, default=server.MAX_IMAGE_BYTES)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from sgvla.vlm.config import TransformersConfig

    try:
        server.check_loopback(args.host)
    except ValueError as e:
        print(f"sgvla vlm-serve: {e}", file=sys.stderr)
        return 2
    backend = TransformersConfig(model=args.model, name=args.name, device=args.device, dtype=args.dtype,
                                 batch_size=1).build()
    uvicorn.run(server.build_app(backend, args.max_image_bytes), host=args.host, port=args.port, log_level="warning")
    return 0
