"""``sgvla vlm-serve``: a local VLM behind a minimal OpenAI-compatible chat endpoint (`sgvla.vlm.server`)."""

from __future__ import annotations

import argparse
import sys

from sgvla.vlm import server


def add_parser(sub) -> None:
    p = sub.add_parser("vlm-serve", help="Serve a local VLM on an OpenAI-compatible endpoint (loopback only).",
                       description="Serves a local VLM behind a minimal OpenAI-compatible chat endpoint "
                                   "(`sgvla.vlm.server`), with the backend local benchmarking uses, so HTTP and "
                                   "local answers of one model compare. Loopback only: any other address is "
                                   "refused.")
    p.add_argument("model", help="Model directory or hub id (loaded with AutoModelForImageTextToText).")
    p.add_argument("--host", default="127.0.0.1", help="A loopback address to listen on (default 127.0.0.1); "
                   "any other is refused.")
    p.add_argument("--port", type=int, default=8000, help="The port to listen on (default 8000).")
    p.add_argument("--name", default="", help="Model name reported to clients (default: directory name).")
    p.add_argument("--device", default="auto",
                   help="Where the model runs: auto, cpu, mps, cuda or cuda:N (default auto).")
    p.add_argument("--dtype", default="auto", help="The weights' dtype: auto (the checkpoint's), float32, "
                   "float16 or bfloat16 (default auto).")
    p.add_argument("--max-image-bytes", type=int, default=server.MAX_IMAGE_BYTES,
                   help="The largest image a request may carry, in bytes (default %(default)s).")
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
