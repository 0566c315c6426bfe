"""``sgvla vlm-bench`` scores the VLM scene graphs of sampled frames against ground truth (`sgvla.vlm.bench`).

Outputs under ``--out``: ``answers/<model>__<prompt>__<constraint>__<settings hash>.jsonl`` (raw answers, the
cache; ``.settings.json`` beside it holds the model, its revision, the generation settings and the prompt that made
them), ``main.md`` (per model: agentview and eye_in_hand mean per-task F1), ``diagnostics``, ``dropped_by_reason``,
``per_relation``, ``per_object_recall`` and ``per_task`` tables (.md and .csv), ``scores.json``, plots,
``examples/`` (ground truth vs prediction) and ``timing.json``. Rerunning with the same settings asks the models
only about frames without an answer; other settings (another model=..., max_new_tokens=...) get their own cache.

A frame whose query failed (server down, model not loadable, timeout) is not scored: it is counted as failed, and
the command exits 1 with the first cause; a rerun asks about it again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sgvla.cli.arguments import split_items
from sgvla.core.config import SYNTAX, parse_items
from sgvla.core.config import ConfigError

CLIENT_OVERRIDES = ("overrides of every --client's config", "model=/path/to/model max_new_tokens=512")


def add_client_arguments(p: argparse.ArgumentParser) -> None:
    """The options `vlm-bench` and `vlm-annotate` share: clients, prompt, sampling."""
    from sgvla.vlm.prompts import DEFAULT_PROMPT

    p.add_argument("--client", action="append", required=True,
                   help="Client config: a name in config/vlm/clients/ or a YAML path (repeat to compare models).")
    p.add_argument("--prompt", default=str(DEFAULT_PROMPT), help="Prompt template YAML.")
    p.add_argument("--frames-per-episode", type=int, default=8, help="Evenly spaced frames per episode (0: all).")
    p.add_argument("--seed", type=int, default=0, help="Seed of the sampling of episodes and frames (default 0).")
    p.add_argument("--chunk", type=int, default=16, help="Frames per query call and cache flush.")
    p.add_argument("--no-progress", action="store_true", help="Show no progress bar.")


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"{what} {item!r}: expected NAME=VALUE")
        out[key] = value
    return out


def add_parser(sub) -> None:
    p = sub.add_parser("vlm-bench", help="Benchmark VLM scene graphs against ground truth.", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="+", metavar="DATA",
                   help="Annotated LIBERO HDF5 files, folders of them, or LeRobot dataset roots; and key=value "
                        "items, {}, e.g. {}; {}.".format(*CLIENT_OVERRIDES, SYNTAX))
    add_client_arguments(p)
    p.add_argument("--out", default="outputs/vlm_bench", help="Output folder (its answers/ cache is reused).")
    p.add_argument("--ontology", default="libero_spatial",
                   help="The objects and relations graphs are scored in: a name in config/ontology/ (default "
                        "libero_spatial; so101_tabletop for the SO101).")
    p.add_argument("--cameras", nargs="+", help="Cameras to score, by name or alias (default: every camera the "
                                                "prompt describes).")
    p.add_argument("--episodes-per-task", type=int, default=0, help="Episodes sampled per task (0: all).")
    p.add_argument("--task-id", action="append", default=[], metavar="FILE_STEM=ID",
                   help="Task id of a file whose language does not name a LIBERO-Spatial task.")
    p.add_argument("--reference", help="Reference graphs (a vlm-annotate graphs.jsonl) for LeRobot datasets.")
    p.add_argument("--examples", type=int, default=6, help="Side-by-side images per model and view.")
    p.set_defaults(func=run, overrides=[])  # key=value items among the options join these


def run(args: argparse.Namespace) -> int:
    from sgvla.scene_graph.ontology import load_ontology
    from sgvla.vlm.bench import Benchmark, load_clients, open_sources
    from sgvla.vlm.frames import Sampling
    from sgvla.vlm.prompts import canonical_camera, load_prompt
    from sgvla.vlm.resource import read_reference_graphs

    data, overrides = split_items(args.data)
    overrides += args.overrides
    try:  # bad input is a message, before any model loads
        if not data:
            raise ValueError("no DATA: name annotated HDF5 files, folders of them or LeRobot dataset roots")
        ontology = load_ontology(args.ontology)
        configs = load_clients(args.client, parse_items(overrides), ontology)
        refs = read_reference_graphs(args.reference) if args.reference else None
        prompt = load_prompt(args.prompt)
        bench = Benchmark(
            sources=open_sources(data, ontology, _pairs(args.task_id, "--task-id"), refs),
            ontology=ontology, prompt=prompt,
            cameras=tuple(canonical_camera(c, prompt) for c in args.cameras or prompt.cameras),
            sampling=Sampling(args.episodes_per_task, args.frames_per_episode, args.seed),
            out=Path(args.out), examples=args.examples, chunk=args.chunk, progress=not args.no_progress,
        )
    except (ConfigError, ValueError, FileNotFoundError) as e:
        print(f"sgvla vlm-bench: {e}", file=sys.stderr)
        return 2
    results = bench.run(configs)
    for note in bench.notes:
        print(note)
    print((bench.out / "main.md").read_text(), end="")
    by_name = {c.name: c for c in configs}
    for r in results:
        failed = sum(r.errors.values())
        if failed:
            print(f"{r.model}: {failed} of {sum(r.sampled.values())} frame(s) have no answer and are not scored "
                  f"(their queries failed: an infrastructure failure, not the model's answer); first cause: "
                  f"{r.failure}")
        rejected, partly = sum(r.rejected.values()), sum(r.partly_rejected.values())
        if rejected:
            print(f"{r.model}: {rejected} answer entr{'y' if rejected == 1 else 'ies'} in {partly} answer(s) were no "
                  "valid triplet of the ontology and were dropped before scoring (`rejected entries` in the "
                  "diagnostics table)")
        cut = sum(r.truncated.values())
        if cut:
            print(f"{r.model}: {cut} answer(s) were cut at the token limit (max_new_tokens "
                  f"{by_name[r.model].max_new_tokens}); their complete triplets were scored (`truncated` in the "
                  "records and the diagnostics table)")
    print(f"wrote {bench.out}")
    failed = [r for r in results if sum(r.errors.values())]
    if failed:
        first = failed[0]
        n = sum(sum(r.errors.values()) for r in failed)
        print(f"sgvla vlm-bench: {n} frame(s) got no answer (their queries failed), so the scores of "
              f"{', '.join(r.model for r in failed)} leave frames out; first cause ({first.model}): "
              f"{first.failure.rstrip('.')}. "
              f"{what_to_do(by_name[first.model], first.failure)} Rerun the same command then: answered frames are "
              "kept, the failed ones are asked again.", file=sys.stderr)
        return 1
    return 0


def what_to_do(config, cause: str) -> str:
    """The next step for a client whose queries failed."""
    if config.type == "openai":
        return (f"Start the server at {config.base_url} (vLLM: `vllm serve {config.model} --host 127.0.0.1`; a "
                "local model: `sgvla vlm-serve MODEL_DIR`), or pass the client's base_url=URL; for timeouts, "
                "timeout_s=SECONDS.")
    if cause.startswith("cannot load"):
        return (f"Pass model=DIR (a local copy of {config.model}'s weights), or serve the model with `sgvla vlm-serve "
                "MODEL_DIR` and use an openai client (e.g. --client vllm_local).")
    return "For out-of-memory failures, pass batch_size=1, a smaller max_new_tokens or device=cpu."
