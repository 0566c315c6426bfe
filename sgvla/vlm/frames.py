"""Frames to query: annotated LIBERO-layout HDF5 files and LeRobot datasets, and how to sample them.

A frame is named by (source, episode, frame, camera) and belongs to a task. Images come out
upright as (H, W, 3) uint8: LIBERO stores both cameras upside down, so its frames are turned
by 180 degrees before a VLM sees them (the stored arrays are never changed).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from sgvla.core.config import ConfigError, load_yaml
from sgvla.paths import CONFIG_DIR
from sgvla.scene_graph.ontology import Ontology
from sgvla.scene_graph.triplet import Graph
from sgvla.vlm.prompts import canonical_camera

ANNOTATION_VERSION = "1"
LIBERO_TASKS = CONFIG_DIR / "vlm" / "libero_spatial_tasks.yaml"


@dataclass(frozen=True)
class Episode:
    source: str
    episode: str
    task_id: str
    task: str
    length: int


@dataclass(frozen=True)
class FrameRef:
    source: str
    episode: str
    frame: int
    camera: str
    task_id: str
    task: str

    @property
    def key(self) -> str:
        return f"{self.source}/{self.episode}/{self.frame}/{self.camera}"


class FrameSource(Protocol):
    name: str
    cameras: tuple[str, ...]

    def episodes(self) -> list[Episode]: ...

    def images(self, episode: str, camera: str, frames: Sequence[int]) -> np.ndarray: ...

    def references(self, episode: str, camera: str, frames: Sequence[int]) -> list[Graph] | None: ...


def _words(text: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


class TaskTable:
    """Task ids by language instruction (and by file name, which LIBERO derives from it), and where the LIBERO
    layout keeps each camera's images (`image_keys`: camera -> dataset name under data/<demo>/obs/)."""

    def __init__(self, tasks: dict[str, str], image_keys: dict[str, str]) -> None:
        self.by_words = {_words(text): str(task_id) for task_id, text in tasks.items()}
        self.image_keys = dict(image_keys)

    @classmethod
    def load(cls, path: str | Path = LIBERO_TASKS) -> TaskTable:
        data = load_yaml(path)
        tasks, keys = data.get("tasks"), data.get("image_keys")
        if not isinstance(tasks, dict) or not tasks:
            raise ConfigError(f"{path}.tasks: expected a mapping of task id -> language instruction")
        if not isinstance(keys, dict) or not keys:
            raise ConfigError(f"{path}.image_keys: expected a mapping of camera -> image dataset name")
        return cls({str(k): str(v) for k, v in tasks.items()}, {str(k): str(v) for k, v in keys.items()})

    def find(self, language: str, file_name: str = "") -> str | None:
        if _words(language) in self.by_words:
            return self.by_words[_words(language)]
        name = _words(file_name)
        hits = [task_id for words, task_id in self.by_words.items() if words and words in name]
        return hits[0] if len(hits) == 1 else None


class LiberoFile:
    """One annotated LIBERO-layout HDF5 file (``sgvla annotate`` output)."""

    def __init__(self, path: str | Path, ontology: Ontology, task_id: str | None = None,
                 tasks: TaskTable | None = None) -> None:
        import h5py

        self.path = Path(path)
        self.name = self.path.stem
        try:
            self.file = h5py.File(self.path, "r")
        except OSError as exc:
            raise ValueError(f"{self.path}: not a readable HDF5 file ({exc})") from None
        data = self.file.get("data")
        if data is None:
            raise ValueError(f"{self.path}: no 'data' group (not a LIBERO-layout file)")
        version = _attr(data, "sgvla_annotation_version")
        if version != ANNOTATION_VERSION:
            raise ValueError(f"{self.path}: data.attrs['sgvla_annotation_version'] is {version!r}, expected "
                             f"{ANNOTATION_VERSION!r}; annotate it with `sgvla annotate` first")
        objects = json.loads(_attr(data, "sgvla_objects") or "[]")
        unknown = sorted(set(objects) - set(ontology.objects))
        if unknown:
            raise ValueError(f"{self.path}: objects {unknown} are not in ontology {ontology.name!r}")
        self.task = json.loads(_attr(data, "problem_info") or "{}").get("language_instruction", "")
        self.table = tasks or TaskTable.load()
        self.task_id = task_id or self.table.find(self.task, self.name)
        if self.task_id is None:
            raise ValueError(f"{self.path}: cannot tell its LIBERO-Spatial task from {self.task!r}; "
                             f"pass --task-id {self.name}=ID")
        self.demos = sorted(data, key=lambda k: int(k.rsplit("_", 1)[-1]) if k.rsplit("_", 1)[-1].isdigit() else 0)
        self.cameras = tuple(v for v, key in self.table.image_keys.items()
                             if self.demos and f"obs/{key}" in data[self.demos[0]])

    def episodes(self) -> list[Episode]:
        first = self.table.image_keys[self.cameras[0]] if self.cameras else next(iter(self.table.image_keys.values()))
        return [Episode(self.name, d, self.task_id, self.task, len(self.file["data"][d]["obs"][first]))
                for d in self.demos]

    def images(self, episode: str, camera: str, frames: Sequence[int]) -> np.ndarray:
        stored = self.file["data"][episode]["obs"][self.table.image_keys[camera]][list(frames)]
        return np.ascontiguousarray(stored[:, ::-1, ::-1])

    def references(self, episode: str, camera: str, frames: Sequence[int]) -> list[Graph]:
        key = f"{camera}_scene_graph"
        obs = self.file["data"][episode]["obs"]
        if key not in obs:
            raise ValueError(f"{self.path}: data/{episode}/obs/{key} missing")
        return [Graph.from_json(g.decode() if isinstance(g, bytes) else g) for g in obs[key][list(frames)]]


def _attr(group, name: str):
    value = group.attrs.get(name)
    return value.decode() if isinstance(value, bytes) else value


class LeRobotSource:
    """Frames of a local LeRobot dataset; optional reference graphs from a graph resource file."""

    def __init__(self, root: str | Path, cameras: dict[str, str] | None = None, rotate: bool = False,
                 references: dict[tuple[int, int, str], Graph] | None = None, repo_id: str | None = None) -> None:
        from lerobot.datasets.lerobot_dataset import LeRobotDataset

        self.root = Path(root)
        self.name = self.root.name
        self.dataset = LeRobotDataset(repo_id or f"local/{self.name}", root=self.root, return_uint8=True)
        keys = self.dataset.meta.camera_keys
        # By default a dataset camera is the prompt's described view of its name (`wrist`: the wrist view), else
        # the fixed view: the prompt file's aliases say which.
        self.keys = cameras or {k: canonical_camera("wrist" if "wrist" in k else "agent") for k in keys}
        missing = sorted(set(self.keys) - set(keys))
        if missing:
            raise ValueError(f"{self.root}: no camera {missing}; it has {keys}")
        self.view_key = {view: key for key, view in self.keys.items()}
        self.cameras = tuple(self.view_key)
        self.rotate = rotate
        self._references = references

    def episodes(self) -> list[Episode]:
        meta = self.dataset.meta
        out = []
        for row in meta.episodes:
            task = (row.get("tasks") or [""])[0]
            task_id = str(int(meta.tasks.loc[task, "task_index"])) if task in meta.tasks.index else "0"
            out.append(Episode(self.name, str(row["episode_index"]), task_id, task, int(row["length"])))
        return out

    def _index(self, episode: str, frame: int) -> int:
        return int(self.dataset.meta.episodes[int(episode)]["dataset_from_index"]) + frame

    def images(self, episode: str, camera: str, frames: Sequence[int]) -> np.ndarray:
        key = self.view_key[camera]
        images = []
        for f in frames:
            image = self.dataset[self._index(episode, f)][key]
            array = image.numpy() if hasattr(image, "numpy") else np.asarray(image)
            if array.dtype != np.uint8:
                array = (np.clip(array, 0, 1) * 255).round().astype(np.uint8)
            array = array.transpose(1, 2, 0)
            images.append(array[::-1, ::-1] if self.rotate else array)
        return np.ascontiguousarray(np.stack(images))

    def references(self, episode: str, camera: str, frames: Sequence[int]) -> list[Graph] | None:
        if self._references is None:
            return None
        try:
            return [self._references[(int(episode), f, camera)] for f in frames]
        except KeyError as exc:
            raise ValueError(f"{self.root}: no reference graph for episode/frame/camera {exc.args[0]}") from None


@dataclass(frozen=True)
class Sampling:
    """Which frames to query: per task, some episodes; per episode, evenly spaced frames."""

    episodes_per_task: int = 0  # 0: every episode
    frames_per_episode: int = 8  # 0: every frame; otherwise first, last and evenly between
    seed: int = 0

    def frame_indices(self, length: int) -> list[int]:
        if self.frames_per_episode <= 0 or self.frames_per_episode >= length:
            return list(range(length))
        return sorted({int(round(x)) for x in np.linspace(0, length - 1, self.frames_per_episode)})

    def sample(self, sources: Sequence[FrameSource], cameras: Sequence[str]) -> list[FrameRef]:
        by_task: dict[str, list[Episode]] = {}
        for source in sources:
            for episode in source.episodes():
                by_task.setdefault(episode.task_id, []).append(episode)
        sources_by_name = {s.name: s for s in sources}
        rng = random.Random(self.seed)
        frames = []
        for task_id in sorted(by_task, key=str):
            episodes = by_task[task_id]
            if 0 < self.episodes_per_task < len(episodes):
                episodes = [episodes[i] for i in sorted(rng.sample(range(len(episodes)), self.episodes_per_task))]
            for ep in episodes:
                for camera in cameras:
                    if camera not in sources_by_name[ep.source].cameras:
                        raise ValueError(f"source {ep.source} has no camera {camera!r}")
                    frames += [FrameRef(ep.source, ep.episode, f, camera, ep.task_id, ep.task)
                               for f in self.frame_indices(ep.length)]
        return frames
