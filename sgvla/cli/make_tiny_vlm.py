"""``sgvla make-tiny-vlm`` saves a tiny random-weight Qwen2.5-VL with its processor (offline; `sgvla.vlm.tiny`) and
a transformers client config beside it (``client.yaml``), so ``vlm-bench``, ``vlm-annotate``, ``graph_source=vlm``
and ``vlm-serve`` run end to end without the hub or a GPU. Its answers are random (mostly dropped as no triplet):
it checks the plumbing, not a model."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# CPU, float32 and a short answer: the tiny tokenizer needs about 40 tokens per triplet line, and a random model
# would otherwise talk for the full 4096 tokens; the grammar keeps every line a triplet of the ontology.
MARK = "# written by sgvla make-tiny-vlm"
CLIENT = (MARK + ": the tiny random model beside this file, on the CPU\n"
          "type: transformers\nname: tiny-qwen2.5-vl\nmodel: {model}\ndevice: cpu\ndtype: float32\nbatch_size: 1\n"
          "max_new_tokens: 48\nconstraint: grammar\n")


def add_parser(sub) -> None:
    p = sub.add_parser("make-tiny-vlm", help="Save a tiny random-weight Qwen2.5-VL and its processor (offline).",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir", type=Path, help="The folder to save the model, its processor and client.yaml in.")
    p.add_argument("--seed", type=int, default=0, help="Seed of the random weights (default 0).")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sgvla.vlm.tiny import build_tiny_qwen2_5_vl

    why = refusal(args.out_dir)
    if why:
        print(f"sgvla make-tiny-vlm: {why}", file=sys.stderr)
        return 2
    from transformers.utils import logging as transformers_logging

    shown = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()  # "Writing model shards" over a model of one small shard
    try:
        path = build_tiny_qwen2_5_vl(args.out_dir, seed=args.seed).absolute()
    finally:
        if shown:
            transformers_logging.enable_progress_bar()
    client = path / "client.yaml"
    client.write_text(CLIENT.format(model=path))
    print(f"tiny Qwen2.5-VL saved to {path} with its client {client}; use it as --client {client} "
          f"(sgvla vlm-bench DATA / sgvla vlm-annotate DATASET), graph_source=vlm graph_source.client={client} "
          f"(sgvla eval), or serve it: sgvla vlm-serve {path} --device cpu")
    return 0


def refusal(out_dir: Path) -> str:
    """Why ``out_dir`` must not be written ("" when it may): a file, or a folder holding something other than a tiny
    model this command made (a real checkpoint there would be overwritten)."""
    if out_dir.exists() and not out_dir.is_dir():
        return f"{out_dir} is a file, not a folder"
    client = out_dir / "client.yaml"
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (client.is_file() and client.read_text().startswith(MARK)):
        return f"{out_dir} is not empty and holds no tiny VLM of this command; give a new or empty folder"
    return ""
