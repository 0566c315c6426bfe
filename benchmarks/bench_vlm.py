"""VLM client speed on a tiny random Qwen2.5-VL: local vs HTTP, constrained vs not, and the
benchmark's own overhead, side by side in one run.

    python benchmarks/bench_vlm.py [--frames 8] [--repeats 3] [--max-new-tokens 32] [--bench-frames-per-episode 12]

Every process runs torch on one thread (OMP_NUM_THREADS=1), so the client process and the server
process get the same compute on a shared machine.

1. Per-frame latency (one 128x128 frame per request, batch 1, greedy, after a warm-up call) of
   the local transformers client and of the HTTP client against `sgvla vlm-serve` started as a
   separate process on 127.0.0.1, each unconstrained and constrained (xgrammar EBNF locally,
   JSON schema over HTTP, which the server also enforces with xgrammar). Configurations take
   turns for ``--repeats`` rounds and the best round counts, so load from other processes
   hits them alike. Milliseconds per generated token are reported too, since constrained and
   free answers differ in length.
2. `sgvla vlm-bench` frames/s excluding model time (model loading and generation), on synthetic
   annotated LIBERO files: once while querying the local model, once resumed from its cache.

The model is random, so the numbers measure the pipeline, not a VLM: on real checkpoints the
generation time dominates and the overheads here become small.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from sgvla.scene_graph import load_ontology  # noqa: E402
from sgvla.vlm.client import GraphQuery, SceneGraphVLM  # noqa: E402
from sgvla.vlm.config import OpenAIConfig, TransformersConfig  # noqa: E402
from sgvla.vlm.prompts import load_prompt  # noqa: E402
from sgvla.vlm.tiny import build_tiny_qwen2_5_vl, write_annotated_libero_file  # noqa: E402

TASKS = ("pick up the black bowl on the stove and place it on the plate",
         "pick up the black bowl next to the plate and place it on the plate")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def per_frame(vlm: SceneGraphVLM, queries: list[GraphQuery]) -> tuple[float, float]:
    """(ms per frame, ms per generated token), one request at a time."""
    start, tokens = time.perf_counter(), 0
    for q in queries:
        answer = vlm.query([q])[0]
        if answer.completion.error:
            raise RuntimeError(answer.completion.error)
        tokens += answer.completion.completion_tokens or 0
    seconds = time.perf_counter() - start
    return 1000 * seconds / len(queries), 1000 * seconds / max(tokens, 1)


def start_server(model_dir: Path) -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "sgvla.cli", "vlm-serve", str(model_dir), "--host", "127.0.0.1",
                             "--port", str(port), "--name", "tiny-qwen"], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, f"{url}/v1"
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("vlm-serve did not start")
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=8, help="timed requests per configuration")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--bench-frames-per-episode", type=int, default=12)
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="bench_vlm_"))
    model_dir = build_tiny_qwen2_5_vl(work / "model")
    ontology, prompt = load_ontology("libero_spatial"), load_prompt()
    rng = np.random.default_rng(0)
    queries = [GraphQuery((rng.integers(0, 256, (128, 128, 3), dtype=np.uint8),), TASKS[0],
                          ("agentview", "robot0_eye_in_hand")[i % 2]) for i in range(args.frames)]

    local = TransformersConfig(model=str(model_dir), name="tiny-qwen", max_new_tokens=args.max_new_tokens,
                               batch_size=1, device="cpu").build()
    proc, url = start_server(model_dir)
    try:
        configs = {("local", c): SceneGraphVLM(local, prompt, ontology, c) for c in ("none", "grammar", "json_schema")}
        for c in ("none", "json_schema"):
            http = OpenAIConfig(model="tiny-qwen", base_url=url, max_new_tokens=args.max_new_tokens,
                                concurrency=1, constraint=c).build()
            configs[("http (vlm-serve)", c)] = SceneGraphVLM(http, prompt, ontology, c)
        best: dict[tuple, tuple[float, float]] = {}
        for vlm in configs.values():
            vlm.query(queries[:1])  # warm-up
        for _ in range(args.repeats):
            for key, vlm in configs.items():
                result = per_frame(vlm, queries)
                best[key] = min(best.get(key, result), result)
        rows = [(*key, *best[key]) for key in configs]
    finally:
        proc.terminate()
        proc.wait(30)

    data = work / "libero"
    data.mkdir()
    for i, task in enumerate(TASKS):
        write_annotated_libero_file(data / f"task{i}.hdf5", task, demos=2, frames=40, size=128, seed=i)
    client = work / "client.yaml"
    client.write_text(f"type: transformers\nname: tiny-qwen\nmodel: {model_dir}\nmax_new_tokens: 8\n"
                      "batch_size: 8\ndevice: cpu\n")
    from sgvla.cli import main as sgvla

    bench_rows = []
    for run in ("querying", "resumed"):
        sgvla(["vlm-bench", str(data), "--client", str(client), "--out", str(work / "out"), "--no-progress",
               "--frames-per-episode", str(args.bench_frames_per_episode)])
        t = json.loads((work / "out" / "timing.json").read_text())
        phases = t["phases_s"]
        examples = phases.get("examples", 0.0)
        bench_rows.append((run, t["frames"], t["queried"], t["total_s"], t["model_s"],
                           t["frames_per_s_excluding_model"], examples,
                           t["frames"] / max(t["total_s"] - t["model_s"] - examples, 1e-9)))

    print(f"\ntiny Qwen2.5-VL ({sum(p.numel() for p in local.model.parameters()) / 1e6:.2f} M parameters), CPU, "
          f"torch threads {__import__('torch').get_num_threads()}, {args.frames} frames of 128x128, "
          f"max_new_tokens {args.max_new_tokens}\n")
    print("| client | constraint | ms / frame | ms / token |\n|---|---|---|---|")
    for client_name, constraint, ms, ms_token in rows:
        print(f"| {client_name} | {constraint} | {ms:.0f} | {ms_token:.1f} |")
    print("\n| vlm-bench run | frames | queried | total s | model s | examples s | frames/s excl. model "
          "| frames/s excl. model and examples |")
    print("|---|---|---|---|---|---|---|---|")
    for run, frames, queried, total, model, fps, examples, fps_core in bench_rows:
        print(f"| {run} | {frames} | {queried} | {total:.1f} | {model:.1f} | {examples:.1f} | {fps:.1f} "
              f"| {fps_core:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
