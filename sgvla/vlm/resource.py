"""The released VLM scene-graph resource: graphs for sampled frames, stored beside a dataset.

Format ``sgvla-vlm-scene-graphs``, version 1. One folder per (model, prompt, constraint) under
``<dataset root>/sgvla_scene_graphs/``:

- ``meta.json``: format and version, dataset, model and client config, the full prompt template
  (name, version, hash and text), ontology objects, relations, camera key -> view, sampling.
- ``graphs.jsonl``: one JSON object per (episode, frame, camera view) with ``episode`` (episode
  index as a string), ``frame`` (frame index within the episode), ``camera`` (view: agentview or
  robot0_eye_in_hand), ``source`` ("vlm"), ``objects``, ``triplets`` ([[subject, relation,
  object], ...], the parsed answer), ``raw`` (the model's answer verbatim), ``rejected`` (parser
  rejections by reason), ``error`` (null unless the query failed), ``model``, ``prompt`` and
  ``prompt_version``, ``constraint``, ``latency_s`` and token counts. Each line is also a graph
  record that ``graph_publisher`` replays on ROS.
- ``README.md``: this description.

The graphs are model output, not ground truth.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from sgvla import __version__
from sgvla.scene_graph.ontology import RELATIONS, Ontology
from sgvla.scene_graph.triplet import Graph
from sgvla.vlm.config import ClientConfig
from sgvla.vlm.prompts import PromptTemplate

FORMAT = "sgvla-vlm-scene-graphs"
VERSION = "1"
FOLDER = "sgvla_scene_graphs"


def write_meta(folder: Path, dataset: str, config: ClientConfig, prompt: PromptTemplate, ontology: Ontology,
               cameras: dict[str, str], sampling: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": FORMAT, "version": VERSION, "sgvla_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "dataset": dataset,
        "model": config.name, "client": {"type": config.type, **asdict(config)},
        "prompt": {**prompt.identity, "template": asdict(prompt)},
        "ontology": {"name": ontology.name, "objects": list(ontology.objects)}, "relations": list(RELATIONS),
        "cameras": cameras, "sampling": sampling,
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=1))
    (folder / "README.md").write_text(__doc__.split("\n\n", 1)[1])


def read_reference_graphs(path: str | Path) -> dict[tuple[int, int, str], Graph]:
    """(episode index, frame index, view) -> graph, from a ``graphs.jsonl`` of this format."""
    path = Path(path)
    if path.is_dir():
        path = path / "graphs.jsonl"
    out = {}
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
                out[(int(r["episode"]), int(r["frame"]), r["camera"])] = Graph.of(r["triplets"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{n}: not a graph record ({exc})") from None
    return out
