"""``sgvla annotate``: add ground-truth scene graphs to a LIBERO-layout HDF5 file.

Each demo's recorded simulator states are replayed kinematically in its own
MuJoCo model (``model_file``, asset paths moved to this machine; files without
it use the model of their LIBERO-Spatial task). Per frame and view this yields
object positions, boxes and the graph of :func:`sgvla.scene_graph.ground_truth_batch`,
written as described in :mod:`sgvla.libero.hdf5`. Boxes use each view's
stored image size. Original datasets are never touched: the output is built in
``<out>.partial`` (a copy of the input) and renamed when complete; a rerun
resumes it, keeping demos already annotated. ``--out`` may equal the input.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import h5py
import mujoco
import numpy as np
from tqdm import tqdm

from sgvla.scene_graph import Camera, ground_truth_batch
from sgvla.libero.hdf5 import (
    ANNOTATION_VERSION, DATA, IMAGE_KEYS, OBJECTS_ATTR, POSITIONS_KEY, STRING, VERSION_ATTR, VIEWS, boxes_key,
    demo_names, partial_path, scene_graph_key, task_language,
)
from sgvla.sim.mujoco_state import CameraRig, geom_batch, object_index

DONE_ATTR = "sgvla_annotated"


@dataclass(frozen=True)
class GraphStats:
    """Of an annotated file: demos, frames, and per view the mean triplets and visible objects per frame."""

    demos: int
    frames: int
    triplets_per_frame: dict[str, float]
    visible_per_frame: dict[str, float]


@lru_cache(maxsize=4)
def _compiled(xml: str) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(xml)


def demo_model(group: h5py.Group, data: h5py.Group, source: Path) -> mujoco.MjModel:
    """The MuJoCo model a demo was recorded in."""
    from sgvla.libero.setup import localize_model_xml, prepare_libero

    if "model_file" in group.attrs:
        xml = group.attrs["model_file"]
        xml = localize_model_xml(xml.decode() if isinstance(xml, bytes) else xml, _assets(prepare_libero()))
    else:
        task_id = _task_id(data, source)
        if task_id is None:
            raise ValueError(f"{source}: demos have no model_file and the file names no LIBERO-Spatial task")
        xml = _task_model_xml(task_id)
    return _compiled(xml)


def _assets(setup) -> Path:
    if setup.assets.path is None:
        raise RuntimeError("no local LIBERO assets; run `sgvla doctor` (install requirements.txt or download them)")
    return setup.assets.path


def _task_id(data: h5py.Group, source: Path) -> int | None:
    """The LIBERO-Spatial task of a file: by its BDDL file name, else by its own file name."""
    from sgvla.libero.tasks import num_tasks, task_info

    names = {task_info(t).name: t for t in range(num_tasks())}
    bddl = data.attrs.get("bddl_file_name", b"")
    for candidate in (Path(bddl.decode() if isinstance(bddl, bytes) else bddl).stem, source.stem.removesuffix("_demo")):
        if candidate in names:
            return names[candidate]
    return None


def task_text(data: h5py.Group, source: Path) -> str:
    """The task string the relation rules read: LIBERO's task language when the file names a
    LIBERO-Spatial task (the BDDL's own sentence says "top layer" where the task says "top drawer"),
    else ``problem_info``'s instruction, else the file name."""
    from sgvla.libero.tasks import task_info

    task_id = _task_id(data, source)
    return task_info(task_id).language if task_id is not None else task_language(data) or source.stem


@lru_cache(maxsize=2)
def _task_model_xml(task_id: int) -> str:
    from sgvla.libero.env import ControlEnv
    from sgvla.libero.tasks import task_info

    env = ControlEnv(bddl_file_name=str(task_info(task_id).bddl_file), use_camera_obs=False, has_offscreen_renderer=False)
    try:
        return env.sim.model.get_xml()
    finally:
        env.close()


def _image_size(obs: h5py.Group, view: str, default: int | None) -> tuple[int, int]:
    key = IMAGE_KEYS[view]
    if key in obs:
        _, height, width, _ = obs[key].shape
        return int(width), int(height)
    if default is None:
        raise ValueError(f"{obs.name} has no {key}; give --image-size")
    return default, default


def annotate_demo(model: mujoco.MjModel, states: np.ndarray, sizes: dict[str, tuple[int, int]], task: str,
                  ) -> tuple[tuple[str, ...], np.ndarray, dict[str, tuple[list[str], np.ndarray]]]:
    """Replay ``states`` (T, 1 + nq + nv); returns object names, positions (T, N, 3) and per view (graphs, boxes)."""
    if states.ndim != 2 or states.shape[1] != 1 + model.nq + model.nv:
        raise ValueError(f"states have shape {states.shape}; this model needs (T, {1 + model.nq + model.nv})")
    data = mujoco.MjData(model)
    index = object_index(model)
    frames = len(states)
    positions = np.empty((frames, len(index.names), 3))
    centers = np.empty((frames, len(index.geom_ids), 3))
    rotations = np.empty((frames, len(index.geom_ids), 3, 3))
    rigs = {view: CameraRig(model, [view], *size) for view, size in sizes.items()}
    poses = {view: np.empty((frames, 4, 4)) for view in sizes}
    for t, state in enumerate(states):
        data.qpos[:] = state[1:1 + model.nq]
        data.qvel[:] = state[1 + model.nq:]
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_camlight(model, data)
        positions[t] = data.xpos[index.body_ids]
        centers[t] = data.geom_xpos[index.geom_ids]
        rotations[t] = data.geom_xmat[index.geom_ids].reshape(-1, 3, 3)
        for view, rig in rigs.items():
            poses[view][t] = rig.poses(data)[view]
    geoms = geom_batch(model, index, centers, rotations)
    result = {}
    for view, (width, height) in sizes.items():
        camera = Camera(view, rigs[view].intrinsics(view), poses[view], width, height)
        batch = ground_truth_batch(index.names, geoms, positions, {view: camera}, task)[view]
        boxes = np.where(batch.visible[..., None], batch.boxes, -1).astype(np.int32)
        result[view] = ([g.to_json() for g in batch.graphs()], boxes)
    return index.names, positions, result


def _copy_atomically(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + ".copying")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def annotate_file(src: str | Path, dst: str | Path, views: Sequence[str] = VIEWS, image_size: int | None = None,
                  progress: bool = True) -> Path:
    src, dst = Path(src), Path(dst)
    if not src.is_file():
        raise FileNotFoundError(f"no such file: {src}")
    unknown = [v for v in views if v not in VIEWS]
    if unknown:
        raise ValueError(f"unknown views {unknown}; choose from {list(VIEWS)}")
    with h5py.File(src, "r") as f:  # before any copy is made
        if DATA not in f:
            raise ValueError(f"{src}: no '{DATA}' group; not a LIBERO-layout file")
    partial = partial_path(dst)
    if not partial.is_file():
        _copy_atomically(src, partial)
    with h5py.File(partial, "r+") as f:
        data = f[DATA]
        task = task_text(data, src)
        names = demo_names(data)
        objects = json.loads(data.attrs[OBJECTS_ATTR]) if OBJECTS_ATTR in data.attrs else None
        for name in tqdm(names, desc=f"annotate {src.name}", disable=not progress, unit="demo"):
            group = data[name]
            obs = group.require_group("obs")
            if group.attrs.get(DONE_ATTR) == ANNOTATION_VERSION:
                continue
            sizes = {view: _image_size(obs, view, image_size) for view in views}
            model = demo_model(group, data, src)
            found, positions, per_view = annotate_demo(model, group["states"][()], sizes, task)
            if objects is None:
                objects = list(found)
                data.attrs[OBJECTS_ATTR] = json.dumps(objects)
            elif list(found) != objects:
                raise ValueError(f"{src}: {name} has objects {list(found)}, earlier demos {objects}")
            for key in [POSITIONS_KEY, *(k for v in views for k in (scene_graph_key(v), boxes_key(v)))]:
                if key in obs:
                    del obs[key]  # left by an interrupted run
            obs.create_dataset(POSITIONS_KEY, data=positions)
            for view, (graphs, boxes) in per_view.items():
                obs.create_dataset(scene_graph_key(view), data=graphs, dtype=STRING)
                obs.create_dataset(boxes_key(view), data=boxes)
            group.attrs[DONE_ATTR] = ANNOTATION_VERSION
            f.flush()
        data.attrs[VERSION_ATTR] = ANNOTATION_VERSION
    os.replace(partial, dst)
    return dst


def graph_stats(path: str | Path, views: Sequence[str] = VIEWS) -> GraphStats:
    """Statistics of the annotations in ``path`` (compare the paper: 42.0 agentview, 16.73 eye_in_hand)."""
    triplets = {v: 0 for v in views}
    visible = {v: 0 for v in views}
    frames = 0
    with h5py.File(path, "r") as f:
        names = demo_names(f[DATA])
        for name in names:
            obs = f[DATA][name]["obs"]
            frames += len(obs[POSITIONS_KEY])
            for view in views:
                triplets[view] += sum(len(json.loads(g)) for g in obs[scene_graph_key(view)].asstr()[()])
                visible[view] += int((obs[boxes_key(view)][()][..., 0] >= 0).sum())
    per = (lambda n: n / frames if frames else 0.0)
    return GraphStats(len(names), frames, {v: per(n) for v, n in triplets.items()}, {v: per(n) for v, n in visible.items()})
