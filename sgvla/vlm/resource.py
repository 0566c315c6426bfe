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

The graphs are model output, not ground truth. Reference graphs of a dataset (ground truth of twin demos, fiducial
graphs of real recordings) are stored the same way in ``<dataset root>/sgvla_scene_graphs/<source>/graphs.jsonl``
(:func:`reference_folder`), with ``source`` naming where they come from; ``sgvla vlm-bench`` scores against them.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from sgvla import __version__
from sgvla.scene_graph.ontology import RELATIONS, Ontology
from sgvla.scene_graph.triplet import Graph
from sgvla.vlm.prompts import canonical_camera
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


REFERENCE_SOURCES = ("ground_truth", "fiducial")  # preferred in this order when a dataset holds several


def reference_folder(dataset: str | Path, source: str) -> Path:
    """Where a dataset's reference graphs from `source` (one of REFERENCE_SOURCES) are stored."""
    if source not in REFERENCE_SOURCES:
        raise ValueError(f"unknown reference graph source {source!r}; choose from {list(REFERENCE_SOURCES)}")
    return Path(dataset) / FOLDER / source


def find_reference_graphs(dataset: str | Path) -> Path | None:
    """The dataset's stored reference graphs (the first of REFERENCE_SOURCES it has), or None."""
    for source in REFERENCE_SOURCES:
        path = reference_folder(dataset, source) / "graphs.jsonl"
        if path.is_file():
            return path
    return None


def append_reference_graphs(dataset: str | Path, source: str, episode: int,
                            graphs: list[dict[str, Graph]]) -> Path:
    """Append the graphs of one saved episode (per frame: camera view -> graph) to the dataset's `source` reference
    graphs, as graph records of this format (episode, frame, canonical camera view, source, objects, triplets)."""
    folder = reference_folder(dataset, source)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "graphs.jsonl"
    with path.open("a", encoding="utf-8") as f:
        for frame, views in enumerate(graphs):
            for camera, graph in views.items():
                f.write(json.dumps({"episode": str(episode), "frame": frame, "camera": canonical_camera(camera),
                                    "source": source, "objects": list(graph.objects()),
                                    "triplets": [list(t) for t in graph], "error": None}) + "\n")
    return path


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
