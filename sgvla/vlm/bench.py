"""The VLM benchmark of ``sgvla vlm-bench``: sample frames, query VLMs (cached, resumable), score, write the
paper's tables.

Outputs under ``out``: ``answers/<model>__<prompt>__<constraint>__<settings hash>.jsonl`` (raw answers, the
cache, with the settings that made them in ``.settings.json``: see `sgvla.vlm.cache`), ``main.md`` (per model:
agentview and eye_in_hand mean per-task F1), ``diagnostics``, ``dropped_by_reason``, ``per_relation``,
``per_object_recall`` and ``per_task`` tables (.md and .csv), ``scores.json``, plots, ``examples/`` (ground truth
vs prediction) and ``timing.json``.

A frame whose query failed (the server was down, the model did not load, a timeout: no answer) is an infrastructure
failure, not an empty graph: it is left out of the scores, counted per model and view (`failed`) with the first
cause, and asked again by the next run. An answer that holds no triplet is the model's and scores as an empty graph.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sgvla.core.config import ConfigError
from sgvla.scene_graph.metrics import aggregate, score_frame
from sgvla.scene_graph.ontology import Ontology
from sgvla.scene_graph.parse import parse_triplets
from sgvla.scene_graph.triplet import Graph
from sgvla.vlm.cache import AnswerCache, answer_settings, setting_differences, settings_key, settings_path
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


def answers_path(out: Path, config: ClientConfig, prompt: PromptTemplate, settings: dict | None = None) -> Path:
    """The cache of `config`'s answers to `prompt`: named by the hash of everything that changes an answer."""
    key = settings_key(settings if settings is not None else answer_settings(config, prompt))
    return out / "answers" / f"{slug(config.name)}__{prompt.label}__{config.constraint}__{key}.jsonl"


def other_caches(path: Path, settings: dict, name: str) -> list[str]:
    """A line for each cache of the same client name in `path`'s folder made with other settings (not reused)."""
    notes = []
    for other in sorted(path.parent.glob(f"{slug(name)}__*.jsonl")):
        if other == path:
            continue
        stored = settings_path(other)
        if stored.is_file():
            diffs = setting_differences(json.loads(stored.read_text()), json.loads(json.dumps(settings, default=str)))
            why = "; ".join(diffs) if diffs else "same settings"
        else:
            why = "written before settings were stored with answers"
        notes.append(f"{name}: the answers in answers/{other.name} were made with other settings and are not "
                     f"reused ({why})")
    return notes


class ClientUnavailable(RuntimeError):
    """A client that could not be built or loaded (a model not found, no network for a hub id, a missing library):
    nothing was asked. `cause` is one paragraph."""

    def __init__(self, config: ClientConfig, cause: str) -> None:
        self.config, self.cause = config, cause
        super().__init__(f"cannot load VLM client {config.name!r} (type {config.type}, model {config.model}): "
                         f"{cause}")


def _paragraph(exc: BaseException, limit: int = 600) -> str:
    """An exception as one paragraph: its type and message, whitespace folded, at most `limit` characters."""
    if isinstance(exc, RuntimeError) and exc.__cause__ is not None:  # a backend's wrapper ("cannot load VLM ...")
        exc = exc.__cause__
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def query_missing(frames: list[FrameRef], sources: dict[str, FrameSource], config: ClientConfig,
                  prompt: PromptTemplate, ontology: Ontology, cache: AnswerCache, timer: Timer,
                  chunk: int = 16, progress: bool = True) -> int:
    """Ask the model about every frame the cache has not finished; returns how many were asked."""
    from tqdm import tqdm

    todo = [f for f in frames if not cache.finished(f.key)]
    if not todo:
        return 0
    start = time.perf_counter()
    try:
        vlm = make_vlm(config, prompt, ontology)
    except Exception as exc:  # whatever loading raises (OSError, ImportError, a hub error) is one message
        raise ClientUnavailable(config, _paragraph(exc)) from exc
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
    """A graph record (the shape ROS nodes replay) plus the frame's identity, the raw answer and what parsing kept
    (`entries` examined, the `triplets`) and dropped (`dropped_by_reason`)."""
    return {"key": frame.key, "dataset": frame.source, "episode": frame.episode, "frame": frame.frame,
            "camera": frame.camera, "task_id": frame.task_id, "source": "vlm", "objects": list(ontology.objects),
            **answer.record(), "entries": answer.parsed.n_lines,
            "dropped_by_reason": answer.parsed.dropped_by_reason(answer.truncated)}


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
    notes: list[str] = field(default_factory=list)  # what the command prints besides the tables (caches not reused)

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
            settings = answer_settings(config, self.prompt)
            path = answers_path(self.out, config, self.prompt, settings)
            self.notes += other_caches(path, settings, config.name)
            with AnswerCache(path, settings) as cache:
                unavailable = ""
                try:
                    queried += query_missing(frames, by_name, config, self.prompt, self.ontology, cache, self.timer,
                                             self.chunk, self.progress)
                except ClientUnavailable as e:
                    unavailable = str(e)  # its frames count as failed queries, the other clients go on
                results.append(self.score(config, frames, refs, cache.records, unavailable))
                records.append(cache.records)
        t = time.perf_counter()
        write_tables(self.out, results, self.prompt.view_labels)
        (self.out / "scores.json").write_text(json.dumps(
            [{"model": r.model, "prompt": r.prompt, "constraint": r.constraint, "sampled": r.sampled,
              "errors": r.errors, "first_failure": r.failure,
              "truncated": r.truncated, "rejected_entries": r.rejected, "answers_with_rejections": r.partly_rejected,
              "entries": r.entries, "kept_triplets": r.kept, "dropped_by_reason": r.dropped,
              "scores": {v: s.to_dict() for v, s in r.scores.items()}} for r in results],
            indent=1))
        write_plots(self.out, results, self.prompt.view_labels)
        t = self.timer.add("tables_and_plots", t)
        self.write_examples(configs, records, frames, refs)
        self.timer.add("examples", t)
        self.write_timing(time.perf_counter() - start, len(frames) * len(configs), queried)
        return results

    def score(self, config: ClientConfig, frames: list[FrameRef], refs: list[Graph], records: dict,
              unavailable: str = "") -> ModelResult:
        """Scores of the answered frames; a frame without an answer (its query failed, or the client could not be
        loaded: `unavailable`) is counted as failed and left out."""
        t = time.perf_counter()
        parsed = {i: parse_triplets(records[f.key]["raw"], self.ontology) for i, f in enumerate(frames)
                  if answered(records, f.key)}
        # Cut at the token limit: the backend said so, or the JSON answer ends inside a value (caches written
        # before the flag existed are judged the same way).
        cut = {i: p.cut or records[frames[i].key].get("finish_reason") == "length" for i, p in parsed.items()}
        t = self.timer.add("parse", t)
        failure = next((unavailable or (records.get(f.key) or {}).get("error") or "not asked"
                        for f in frames if not answered(records, f.key)), "")
        scores, sampled, errors, truncated, rejected, partly, entries, kept, dropped = ({} for _ in range(9))
        for camera in self.cameras:
            idx = [i for i, f in enumerate(frames) if f.camera == camera]
            if not idx:
                continue
            ok = [i for i in idx if i in parsed]
            sampled[camera], errors[camera] = len(idx), len(idx) - len(ok)
            if ok:
                scores[camera] = aggregate([(frames[i].task_id, parsed[i].triplets, refs[i]) for i in ok],
                                           self.ontology)
            truncated[camera] = sum(cut[i] for i in ok)
            rejected[camera] = sum(len(parsed[i].rejected) for i in ok)
            partly[camera] = sum(bool(parsed[i].rejected) for i in ok)
            entries[camera] = sum(parsed[i].n_lines for i in ok)
            kept[camera] = sum(len(parsed[i].triplets) for i in ok)
            dropped[camera] = dict(sum((Counter(parsed[i].dropped_by_reason(cut[i])) for i in ok), Counter()))
        self.timer.add("score", t)
        return ModelResult(config.name, self.prompt.label, config.constraint, scores, errors, truncated, rejected,
                           partly, sampled, failure, entries, kept, dropped)

    def write_examples(self, configs: Sequence[ClientConfig], records: Sequence[dict], frames: list[FrameRef],
                       refs: list[Graph]) -> None:
        if self.examples <= 0:
            return
        by_name = {s.name: s for s in self.sources}
        for config, answers in zip(configs, records):
            for camera in self.cameras:
                idx = [i for i, f in enumerate(frames) if f.camera == camera and answered(answers, f.key)]
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


def answered(records: dict, key: str) -> bool:
    """The frame has an answer: its query did not fail."""
    record = records.get(key)
    return record is not None and not record.get("error")


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
