"""Perceived object poses and scene graphs of every frame of a recorded LeRobot dataset, stored beside it (``sgvla
annotate DATASET``) and reloaded with it (:func:`load_annotations`): what the fiducial perception made of each row.

Format ``sgvla-fiducial-annotations``, version 1, in the dataset's ``fiducial`` reference folder
(`sgvla.vlm.resource.reference_folder`, ``<root>/sgvla_scene_graphs/fiducial/``):

- ``manifest.json``: format, version, and the settings that made them: the marker config (its file and content) and
  each dataset camera's model (calibration name, intrinsics at the recorded size, extrinsic, graph view).
- ``graphs.jsonl``: one graph record per (episode, frame, camera view), the dataset's ``fiducial`` reference graphs
  that ``sgvla vlm-bench`` scores against (`sgvla.vlm.resource.append_reference_graphs`).
- ``poses/episode_NNNNNN.jsonl``: one JSON object per frame of the episode: ``episode``, ``frame`` (frame index),
  ``index`` (the dataset's global row index), ``time_s`` and ``objects``: name -> ``position`` (x, y, z metres in
  base_link), ``orientation_xyzw``, ``status`` (``seen``: a marker of it in a camera in this frame; ``held``: kept
  from an earlier sighting, at most the marker config's ``max_age_s``; ``carried``: following the gripper),
  ``cameras`` (the dataset cameras that saw it in this frame), ``seen_at`` and ``age_s`` (seconds since that
  sighting), ``markers`` (marker sightings that made the pose) and ``error_px`` (their best RMS reprojection error).
  Objects not perceived (never seen, or aged out) are absent.

Episodes are written one at a time, the poses file last and atomically: an episode is stored when its poses file
exists. A rerun (after a kill, or after more episodes were recorded) first drops graph records of episodes without
one, then annotates only those, so each episode is stored exactly once. Annotations made with other settings are
refused (``redo`` writes them anew), so a folder never mixes them.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sgvla import __version__
from sgvla.scene_graph.triplet import Graph
from sgvla.so101.kinematics import Kinematics, quaternion_matrix, quaternion_xyzw, transform
from sgvla.so101.perception.fiducials import MarkerConfig
from sgvla.so101.perception.poses import CameraModel
from sgvla.so101.perception.replay import PerceivedFrame, dataset_source, replay_episode
from sgvla.vlm.prompts import canonical_camera
from sgvla.vlm.resource import append_reference_graphs, read_reference_graphs, reference_folder

FORMAT = "sgvla-fiducial-annotations"
VERSION = "1"
SOURCE = "fiducial"  # the reference graph source these graphs are
MANIFEST = "manifest.json"
GRAPHS = "graphs.jsonl"
POSES = "poses"
STATUSES = ("seen", "held", "carried")


class AnnotationError(ValueError):
    """Stored annotations that cannot be extended or read as asked (other settings, none stored, incomplete)."""


def annotation_folder(root: str | Path) -> Path:
    return reference_folder(root, SOURCE)


def poses_file(root: str | Path, episode: int) -> Path:
    return annotation_folder(root) / POSES / f"episode_{episode:06d}.jsonl"


def settings(cameras: Mapping[str, CameraModel], markers: MarkerConfig) -> dict:
    """What the annotations depend on, as JSON: the marker config's content and each dataset camera's model."""
    config = dataclasses.asdict(markers)
    config.pop("source", None)
    models = {name: {"view": canonical_camera(name), "calibration": c.name, "width": c.width, "height": c.height,
                     "K": np.asarray(c.K).tolist(), "distortion": np.asarray(c.distortion).tolist(),
                     "parent_frame": c.parent_frame,
                     "parent_from_camera": None if c.parent_from_camera is None else c.parent_from_camera.tolist()}
              for name, c in cameras.items()}
    return json.loads(json.dumps({"markers": config, "cameras": models}))


def _check_settings(folder: Path, wanted: dict) -> None:
    """Refuse a folder annotated with other settings, or holding fiducial graphs of unknown settings."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        if (folder / GRAPHS).is_file() or (folder / POSES).is_dir():
            raise AnnotationError(f"{folder} holds fiducial annotations without a {MANIFEST} (made by an earlier "
                                  "sgvla; their settings are unknown); redo them (sgvla annotate --redo)")
        return
    stored = json.loads(manifest.read_text())
    if stored.get("format") != FORMAT or stored.get("version") != VERSION:
        raise AnnotationError(f"{manifest}: format {stored.get('format')!r} version {stored.get('version')!r}, "
                              f"expected {FORMAT!r} version {VERSION!r}; redo them (sgvla annotate --redo)")
    differ = []
    if stored.get("markers") != wanted["markers"]:
        differ.append(f"the marker config (stored: from {stored.get('markers_file') or '?'})")
    cameras = stored.get("cameras", {})
    if set(cameras) != set(wanted["cameras"]):
        differ.append(f"the cameras (stored: {sorted(cameras)}, now: {sorted(wanted['cameras'])})")
    else:
        differ += [f"camera {name!r}'s model (stored: calibration {cameras[name].get('calibration')!r} at "
                   f"{cameras[name].get('width')}x{cameras[name].get('height')})"
                   for name in sorted(cameras) if cameras[name] != wanted["cameras"][name]]
    if differ:
        raise AnnotationError(f"{folder}: the stored annotations were made with other settings ({'; '.join(differ)} "
                              "differ); they are not mixed with these: redo them all (sgvla annotate --redo)")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _stored_episodes(root: Path) -> set[int]:
    """Episodes whose poses file exists; graph records of any other episode (a killed run's) are dropped."""
    folder = annotation_folder(root)
    done = {int(p.stem.removeprefix("episode_")) for p in (folder / POSES).glob("episode_*.jsonl")}
    graphs = folder / GRAPHS
    if not graphs.is_file():
        if done:
            raise AnnotationError(f"{folder}: poses of episodes {sorted(done)} but no {GRAPHS}; redo them "
                                  "(sgvla annotate --redo)")
        return done
    lines = graphs.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = []
    for line in lines:
        try:
            if int(json.loads(line)["episode"]) in done:
                kept.append(line)
        except (ValueError, KeyError, TypeError):  # a line cut short by a kill
            continue
    if len(kept) != len(lines) or (lines and not lines[-1].endswith("\n")):
        _write_atomic(graphs, "".join(line if line.endswith("\n") else line + "\n" for line in kept))
    return done


def _pose_records(episode: int, start: int, frames: list[PerceivedFrame]) -> str:
    out = []
    for n, f in enumerate(frames):
        objects = {}
        for name, pose in f.poses.items():
            status = "carried" if pose.carried else "seen" if f.seen_by.get(name) else "held"
            objects[name] = {"position": [float(v) for v in pose.position],
                             "orientation_xyzw": list(quaternion_xyzw(pose.pose[:3, :3])), "status": status,
                             "cameras": list(f.seen_by.get(name, ())), "seen_at": float(pose.seen_at),
                             "age_s": float(f.time_s - pose.seen_at), "markers": int(pose.markers),
                             "error_px": float(pose.error_px)}
        out.append(json.dumps({"episode": episode, "frame": n, "index": start + n, "time_s": f.time_s,
                               "objects": objects}) + "\n")
    return "".join(out)


@dataclass(frozen=True)
class AnnotateResult:
    """Where the annotations are, the episodes this run annotated (and their frames) and those already stored."""

    folder: Path
    annotated: list[int]
    frames: int
    stored: list[int]


def annotate_dataset(root: str | Path, cameras: Mapping[str, CameraModel], markers: MarkerConfig, *,
                     redo: bool = False, kinematics: Kinematics | None = None,
                     progress: Callable[[int, int], None] | None = None) -> AnnotateResult:
    """Perceived poses and graphs of every frame of the LeRobot dataset at `root` (dataset camera name -> its model
    at the recorded size), stored beside it; episodes already stored are kept (`redo`: all written anew).
    `progress(episode, frames)` is called after each episode stored."""
    root = Path(root)
    source = dataset_source(root, cameras)
    folder = annotation_folder(root)
    wanted = settings(cameras, markers)
    if redo:
        shutil.rmtree(folder / POSES, ignore_errors=True)
        for name in (GRAPHS, MANIFEST):
            (folder / name).unlink(missing_ok=True)
    _check_settings(folder, wanted)
    stored = _stored_episodes(root)
    if not (folder / MANIFEST).is_file():
        folder.mkdir(parents=True, exist_ok=True)
        manifest = {"format": FORMAT, "version": VERSION, "sgvla_version": __version__,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "dataset": str(root),
                    "source": SOURCE, "markers_file": markers.source, **wanted}
        _write_atomic(folder / MANIFEST, json.dumps(manifest, indent=1))
    (folder / POSES).mkdir(parents=True, exist_ok=True)
    kinematics = kinematics or Kinematics()
    annotated, frames = [], 0
    for episode in source.episodes():
        index = int(episode.episode)
        if index in stored:
            continue
        perceived = replay_episode(source, index, cameras, markers, kinematics, episode.task)
        append_reference_graphs(root, SOURCE, index, [f.graphs for f in perceived])
        start = int(source.dataset.meta.episodes[index]["dataset_from_index"])
        _write_atomic(poses_file(root, index), _pose_records(index, start, perceived))
        annotated.append(index)
        frames += len(perceived)
        if progress is not None:
            progress(index, len(perceived))
    return AnnotateResult(folder, annotated, frames, sorted(stored))


@dataclass(frozen=True)
class PerceivedObject:
    """One object's stored pose in one frame (see the module docstring for the fields)."""

    name: str
    position: np.ndarray
    orientation_xyzw: np.ndarray
    status: str
    cameras: tuple[str, ...]
    seen_at: float
    age_s: float
    markers: int
    error_px: float

    @property
    def pose(self) -> np.ndarray:
        """(4, 4) base_link-from-object."""
        return transform(quaternion_matrix(self.orientation_xyzw), self.position)


@dataclass(frozen=True)
class FrameAnnotation:
    """One dataset row's annotations: its perceived objects and, per dataset camera, the graph of them."""

    episode: int
    frame: int
    index: int
    time_s: float
    objects: dict[str, PerceivedObject]
    graphs: dict[str, Graph]


class DatasetAnnotations:
    """The stored annotations of one dataset, by the dataset's global row index (``ds[i]["index"]``) or by
    (episode index, frame index); :attr:`manifest` says what made them."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        folder = annotation_folder(self.root)
        if not (folder / MANIFEST).is_file():
            raise AnnotationError(f"{self.root}: no fiducial annotations ({folder / MANIFEST} missing); run "
                                  f"`sgvla annotate {self.root}`")
        self.manifest = json.loads((folder / MANIFEST).read_text())
        if self.manifest.get("format") != FORMAT or self.manifest.get("version") != VERSION:
            raise AnnotationError(f"{folder / MANIFEST}: not {FORMAT} version {VERSION}")
        name_of = {c["view"]: name for name, c in self.manifest["cameras"].items()}
        graphs = read_reference_graphs(folder / GRAPHS) if (folder / GRAPHS).is_file() else {}
        self._frames: dict[tuple[int, int], FrameAnnotation] = {}
        self._by_index: dict[int, tuple[int, int]] = {}
        for path in sorted((folder / POSES).glob("episode_*.jsonl")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                try:
                    r = json.loads(line)
                    key = (int(r["episode"]), int(r["frame"]))
                    objects = {name: PerceivedObject(name, np.array(o["position"]), np.array(o["orientation_xyzw"]),
                                                     o["status"], tuple(o["cameras"]), float(o["seen_at"]),
                                                     float(o["age_s"]), int(o["markers"]), float(o["error_px"]))
                               for name, o in r["objects"].items()}
                    views = {name_of[view]: graphs[(*key, view)] for view in name_of}
                except KeyError as exc:
                    raise AnnotationError(f"{path}:{n}: incomplete annotations (no {exc.args[0]!r}); redo them "
                                          "(sgvla annotate --redo)") from None
                except (ValueError, TypeError) as exc:
                    raise AnnotationError(f"{path}:{n}: not a pose record ({exc})") from None
                self._frames[key] = FrameAnnotation(*key, int(r["index"]), float(r["time_s"]), objects, views)
                self._by_index[int(r["index"])] = key

    @property
    def episodes(self) -> list[int]:
        return sorted({e for e, _ in self._frames})

    @property
    def cameras(self) -> list[str]:
        return list(self.manifest["cameras"])

    def __len__(self) -> int:
        return len(self._frames)

    def __getitem__(self, index: int) -> FrameAnnotation:
        """The annotations of the dataset's row ``index`` (global, as ``LeRobotDataset`` numbers its rows)."""
        if index not in self._by_index:
            raise KeyError(f"{self.root}: no annotations of row {index}; annotated episodes: {self.episodes}")
        return self._frames[self._by_index[index]]

    def at(self, episode: int, frame: int) -> FrameAnnotation:
        if (episode, frame) not in self._frames:
            raise KeyError(f"{self.root}: no annotations of episode {episode} frame {frame}; annotated episodes: "
                           f"{self.episodes}")
        return self._frames[(episode, frame)]

    def of(self, item: Mapping) -> FrameAnnotation:
        """The annotations of a ``LeRobotDataset`` item (``ds[i]``), by its episode and frame index."""
        return self.at(int(item["episode_index"]), int(item["frame_index"]))


def load_annotations(dataset) -> DatasetAnnotations:
    """The stored annotations of a dataset: its root folder, or a ``LeRobotDataset`` (its ``root``)."""
    return DatasetAnnotations(dataset if isinstance(dataset, (str, Path)) else dataset.root)
