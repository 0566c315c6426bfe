"""The VLM benchmark of ``sgvla vlm-bench``: sample frames, query VLMs (cached, resumable), score, write the
paper's tables.

Outputs under ``out``: ``answers/<model>__<prompt>__<constraint>.jsonl`` (raw answers, the
cache), ``main.md`` (per model: agentview and eye_in_hand mean per-task F1), ``diagnostics``,
``per_relation``, ``per_object_recall`` and ``per_task`` tables (.md and .csv), ``scores.json``,
plots, ``examples/`` (ground truth vs prediction) and ``timing.json``.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sgvla.core.config import ConfigError
from sgvla.scene_graph.metrics import aggregate, score_frame
from sgvla.scene_graph.ontology import Ontology
from sgvla.scene_graph.parse import parse_triplets
from sgvla.scene_graph.triplet import Graph
from sgvla.vlm.cache import AnswerCache
from sgvla.vlm.client import GraphAnswer, GraphQuery
from sgvla.vlm.config import ClientConfig, load_client_config, make_vlm
from sgvla.vlm.frames import FrameRef, FrameSource, LeRobotSource, LiberoFile, Sampling, TaskTable
from sgvla.vlm.prompts import PromptTemplate
from sgvla.vlm.report import ModelResult, side_by_side, write_plots, write_tables
from sgvla.vlm.resource import find_reference_graphs, read_reference_graphs


@dataclass
class Timer:
    """Wall seconds per phase; the model's own time is kept apart from the benchmark's."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, phase: str, since: float) -> float:
        now = time.perf_counter()
        self.seconds[phase] += now - since
        return now


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_") or "model"


def open_sources(paths: Sequence[str | Path], ontology: Ontology, task_ids: dict[str, str] | None = None,
                 references: dict | None = None) -> list[FrameSource]:
    """HDF5 files, folders of them, or LeRobot dataset roots (folders with meta/info.json). A LeRobot dataset is
    scored against `references` where given, else against the reference graphs stored with it (ground truth of
    twin demos, `sgvla.vlm.resource.find_reference_graphs`)."""
    task_ids = task_ids or {}
    table = TaskTable.load()
    sources: list[FrameSource] = []
    for raw in paths:
        path = Path(raw)
        if (path / "meta" / "info.json").is_file():
            stored = find_reference_graphs(path) if references is None else None
            refs = read_reference_graphs(stored) if stored else references
            unknown = sorted({o for g in (refs or {}).values() for o in g.objects()} - set(ontology.objects))
            if unknown:
                raise ValueError(f"{path}: its reference graphs name {unknown}, which are not in ontology "
                                 f"{ontology.name!r}; pass the dataset's --ontology")
            sources.append(LeRobotSource(path, references=refs))
            continue
        files = sorted(path.glob("*.hdf5")) + sorted(path.glob("*.h5")) if path.is_dir() else [path]
        if not files or not all(f.is_file() for f in files):
            raise FileNotFoundError(f"{path}: no HDF5 file or LeRobot dataset there")
        sources += [LiberoFile(f, ontology, task_ids.get(f.stem), table) for f in files]
    return sources


def answers_path(out: Path, config: ClientConfig, prompt: PromptTemplate) -> Path:
    return out / "answers" / f"{slug(config.name)}__{prompt.label}__{config.constraint}.jsonl"


def query_missing(frames: list[FrameRef], sources: dict[str, FrameSource], config: ClientConfig,
                  prompt: PromptTemplate, ontology: Ontology, cache: AnswerCache, timer: Timer,
                  chunk: int = 16, progress: bool = True) -> int:
    """Ask the model about every frame the cache has not finished; returns how many were asked."""
    from tqdm import tqdm

    todo = [f for f in frames if not cache.finished(f.key)]
    if not todo:
        return 0
    start = time.perf_counter()
    vlm = make_vlm(config, prompt, ontology)
    timer.add("model_load", start)
    try:
        with tqdm(total=len(todo), desc=config.name, unit="frame", disable=not progress) as bar:
            for i in range(0, len(todo), chunk):
                part = todo[i : i + chunk]
                t = time.perf_counter()
                queries = [GraphQuery((image,), f.task, f.camera) for f, image in zip(part, _images(part, sources))]
                t = timer.add("load_images", t)
                before = vlm.model_seconds
                answers = vlm.query(queries)
                timer.seconds["model"] += vlm.model_seconds - before
                t = time.perf_counter()
                for frame, answer in zip(part, answers):
                    cache.add(frame_record(frame, answer, ontology))
                timer.add("cache", t)
                bar.update(len(part))
    finally:
        vlm.close()
    return len(todo)


def frame_record(frame: FrameRef, answer: GraphAnswer, ontology: Ontology) -> dict:
    """A graph record (the shape ROS nodes replay) plus the frame's identity and the raw answer."""
    return {"key": frame.key, "dataset": frame.source, "episode": frame.episode, "frame": frame.frame,
            "camera": frame.camera, "task_id": frame.task_id, "source": "vlm", "objects": list(ontology.objects),
            **answer.record()}


def _images(frames: Sequence[FrameRef], sources: dict[str, FrameSource]):
    """Images of frames, read one (source, episode, camera) run at a time."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, f in enumerate(frames):
        groups[(f.source, f.episode, f.camera)].append(i)
    out = [None] * len(frames)
    for (source, episode, camera), idx in groups.items():
        order = sorted(idx, key=lambda i: frames[i].frame)
        for i, image in zip(order, sources[source].images(episode, camera, [frames[i].frame for i in order])):
            out[i] = image
    return out


def references(frames: Sequence[FrameRef], sources: dict[str, FrameSource]) -> list[Graph]:
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, f in enumerate(frames):
        groups[(f.source, f.episode, f.camera)].append(i)
    out: list[Graph | None] = [None] * len(frames)
    for (source, episode, camera), idx in groups.items():
        order = sorted(idx, key=lambda i: frames[i].frame)
        graphs = sources[source].references(episode, camera, [frames[i].frame for i in order])
        if graphs is None:
            raise ValueError(f"source {source} has no reference graphs: pass --reference (a graphs.jsonl) for a "
                             "LeRobot dataset that stores none")
        for i, graph in zip(order, graphs):
            out[i] = graph
    return out  # type: ignore[return-value]


def best_renaming(pred: Graph, ref: Graph, ontology: Ontology) -> Graph:
    """The prediction under the instance renaming with the most exact matches (identity on ties)."""
    ref_set = set(ref)
    return max((pred.rename(m) for m in ontology.assignments()), key=lambda g: len(set(g) & ref_set))


@dataclass
class Benchmark:
    sources: list[FrameSource]
    ontology: Ontology
    prompt: PromptTemplate
    cameras: tuple[str, ...]
    sampling: Sampling
    out: Path
    examples: int = 6
    chunk: int = 16
    progress: bool = True
    timer: Timer = field(default_factory=Timer)

    def run(self, configs: Sequence[ClientConfig]) -> list[ModelResult]:
        start = time.perf_counter()
        self.out.mkdir(parents=True, exist_ok=True)
        by_name = {s.name: s for s in self.sources}
        t = time.perf_counter()
        frames = self.sampling.sample(self.sources, self.cameras)
        refs = references(frames, by_name)
        self.timer.add("sample_and_references", t)
        results, records, queried = [], [], 0
        for config in configs:
            with AnswerCache(answers_path(self.out, config, self.prompt)) as cache:
                queried += query_missing(frames, by_name, config, self.prompt, self.ontology, cache, self.timer,
                                         self.chunk, self.progress)
                results.append(self.score(config, frames, refs, cache.records))
                records.append(cache.records)
        t = time.perf_counter()
        write_tables(self.out, results, self.prompt.view_labels)
        (self.out / "scores.json").write_text(json.dumps(
            [{"model": r.model, "prompt": r.prompt, "constraint": r.constraint, "errors": r.errors,
              "truncated": r.truncated, "rejected_entries": r.rejected, "answers_with_rejections": r.partly_rejected,
              "scores": {v: s.to_dict() for v, s in r.scores.items()}} for r in results],
            indent=1))
        write_plots(self.out, results, self.prompt.view_labels)
        t = self.timer.add("tables_and_plots", t)
        self.write_examples(configs, records, frames, refs)
        self.timer.add("examples", t)
        self.write_timing(time.perf_counter() - start, len(frames) * len(configs), queried)
        return results

    def score(self, config: ClientConfig, frames: list[FrameRef], refs: list[Graph], records: dict) -> ModelResult:
        t = time.perf_counter()
        parsed = [parse_triplets(records[f.key]["raw"], self.ontology) for f in frames]
        preds = [p.triplets for p in parsed]
        # Cut at the token limit: the backend said so, or the JSON answer ends inside a value (caches written
        # before the flag existed are judged the same way).
        cut = [p.cut or records[f.key].get("finish_reason") == "length" for p, f in zip(parsed, frames)]
        t = self.timer.add("parse", t)
        scores, errors, truncated, rejected, partly = {}, {}, {}, {}, {}
        for camera in self.cameras:
            idx = [i for i, f in enumerate(frames) if f.camera == camera]
            if idx:
                scores[camera] = aggregate([(frames[i].task_id, preds[i], refs[i]) for i in idx], self.ontology)
                errors[camera] = sum(bool(records[frames[i].key].get("error")) for i in idx)
                truncated[camera] = sum(cut[i] for i in idx)
                rejected[camera] = sum(len(parsed[i].rejected) for i in idx)
                partly[camera] = sum(bool(parsed[i].rejected) for i in idx)
        self.timer.add("score", t)
        return ModelResult(config.name, self.prompt.label, config.constraint, scores, errors, truncated, rejected,
                           partly)

    def write_examples(self, configs: Sequence[ClientConfig], records: Sequence[dict], frames: list[FrameRef],
                       refs: list[Graph]) -> None:
        if self.examples <= 0:
            return
        by_name = {s.name: s for s in self.sources}
        for config, answers in zip(configs, records):
            for camera in self.cameras:
                idx = [i for i, f in enumerate(frames) if f.camera == camera]
                chosen = sorted({idx[int(k)] for k in _spread(len(idx), self.examples)}) if idx else []
                folder = self.out / "examples" / slug(config.name) / camera
                folder.mkdir(parents=True, exist_ok=True)
                for i in chosen:
                    f = frames[i]
                    pred = parse_triplets(answers[f.key]["raw"], self.ontology).triplets
                    s = score_frame(pred, refs[i], self.ontology)
                    image = by_name[f.source].images(f.episode, f.camera, [f.frame])[0]
                    side_by_side(folder / f"{slug(f.key)}.png", image, f"{config.name}\n{f.key} (T{f.task_id})",
                                 refs[i], best_renaming(pred, refs[i], self.ontology), s.f1, s.swapped)

    def write_timing(self, total: float, frames: int, queried: int) -> None:
        seconds = dict(self.timer.seconds)
        model = seconds.get("model", 0.0) + seconds.get("model_load", 0.0)
        timing = {"frames": frames, "queried": queried, "total_s": total, "model_s": model,
                  "frames_per_s_excluding_model": frames / max(total - model, 1e-9), "phases_s": seconds}
        (self.out / "timing.json").write_text(json.dumps(timing, indent=1))


def _spread(n: int, k: int) -> list[float]:
    import numpy as np

    return list(np.linspace(0, n - 1, min(n, k)).round()) if n else []


def load_clients(clients: Sequence[str], overrides: dict | None = None, ontology: Ontology | None = None
                 ) -> list[ClientConfig]:
    """Client configs (names in config/vlm/clients/ or YAML paths), each with the same overrides; checked for the
    machine (API keys) and, with an ontology, for a token budget that holds its full graph."""
    configs = [load_client_config(c, overrides, ontology) for c in clients]
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise ConfigError(f"clients need distinct names (the `name` key), got {names}")
    for config in configs:
        config.check_environment()
    return configs
