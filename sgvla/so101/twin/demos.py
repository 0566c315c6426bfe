"""Scripted demonstrations in the SO101 twin, written as the LeRobot dataset `sgvla record` writes on the arm.

The twin's privileged pick-and-place (`TwinPickPlace`, told the target bowl by the task's goal) acts at the rig's
control rate; every step becomes a frame with the features of `sgvla record` (`dataset_features`):
``observation.state`` (the joints before the step) and ``action`` (the goal sent, after the arm's safety rule
`safe_goal`, as the recorder stores what it sent) in LeRobot units, ``observation.images.<camera>`` rendered by the
twin's cameras (named as the twin rig's), and the task's prompt. Only successful episodes are saved, each whole
(`EpisodeStore`); a rerun into the same folder resumes: the seeds tried so far are kept in ``sgvla_demos.json``.
The ground-truth scene graph of every frame and camera is stored beside the dataset as its reference graphs
(`sgvla.vlm.resource.reference_folder(root, "ground_truth")`), which ``sgvla vlm-bench <root>`` scores VLM graphs of
the frames against.
Train on the result with ``lerobot-train --dataset.root=<out>``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from sgvla.so101.hardware.joints import JOINTS, from_radians, to_radians
from sgvla.so101.hardware.safety import SafetyConfig, safe_goal
from sgvla.scene_graph.triplet import Graph
from sgvla.so101.cameras import AGENTVIEW, WRIST
from sgvla.vlm.resource import append_reference_graphs

log = logging.getLogger(__name__)

CAMERAS = (AGENTVIEW, WRIST)  # the twin rig's camera names (config/hardware/twin.yaml), which the twin node publishes
PROGRESS = "sgvla_demos.json"  # next seed per task


def _progress(root: Path) -> dict[str, int]:
    path = root / PROGRESS
    return {k: int(v) for k, v in json.loads(path.read_text()).items()} if path.is_file() else {}


def _save_progress(root: Path, progress: dict[str, int]) -> None:
    tmp = root / (PROGRESS + ".tmp")
    tmp.write_text(json.dumps(progress))
    tmp.replace(root / PROGRESS)


def record_episode(backend, store, seed: int, size: tuple[int, int], safety: SafetyConfig,
                   graphs: list[dict[str, Graph]] | None = None) -> tuple[bool, int]:
    """One scripted episode into the store's buffer; (success, frames). The caller saves or discards it. With
    `graphs`, the ground-truth graph of each camera is appended per frame."""
    width, height = size
    backend.reset(seed)
    target, place = backend.episode_info()["goal"]
    expert = backend.pick_place(target, place)
    twin = backend.twin
    for _ in range(backend.max_steps):
        joints = twin.joint_positions()
        state = from_radians(JOINTS, [joints[j] for j in JOINTS])
        goal = safe_goal(from_radians(JOINTS, list(expert.act(backend.scene()))), state, safety)
        frame = {"observation.state": np.array([state[j] for j in JOINTS], np.float32),
                 "action": np.array([goal[j] for j in JOINTS], np.float32), "task": backend.task}
        for camera in CAMERAS:
            frame[f"observation.images.{camera}"] = twin.render(camera, width, height)
        if graphs is not None:
            graphs.append({view: truth.graph for view, truth in twin.ground_truth(CAMERAS).items()})
        store.add(frame)
        _, success, done = backend.step(np.array(to_radians(goal)))
        if done:
            return success, store.frames
    return False, store.frames


def generate(task_ids: list[int], episodes: int, root: Path, *, image_size: tuple[int, int] = (128, 96),
             perturbation: str = "none", max_attempts: int | None = None, max_steps: int | None = None,
             repo_id: str = "local/so101_twin_demos") -> Path:
    """`episodes` successful demos of each twin task into the LeRobot dataset at `root` (created, or resumed)."""
    from sgvla.so101.hardware.recording import EpisodeStore, dataset_features
    from sgvla.so101.twin.backend import DEFAULT_MAX_STEPS, TwinBackend
    from sgvla.so101.twin.config import load_twin_config

    width, height = image_size
    if not (16 <= width <= 1024 and 16 <= height <= 1024):
        raise ValueError(f"image size must be within 16..1024 pixels each, got {width}x{height}")
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    known = range(len(load_twin_config().tasks))
    unknown = [t for t in task_ids if t not in known]
    if unknown or not task_ids:
        raise ValueError(f"unknown twin task id(s) {unknown or task_ids}; valid: {list(known)}")
    max_attempts = max_attempts or 3 * episodes
    root = Path(root)
    config = load_twin_config()
    features = dataset_features({c: (height, width, False) for c in CAMERAS})
    store = EpisodeStore(root, repo_id, round(config.control_rate_hz), features)
    safety = SafetyConfig()
    progress = _progress(root)
    try:
        for task_id in task_ids:
            backend = TwinBackend(task_id, render_images=False, perturbation=perturbation,
                                  max_steps=max_steps or DEFAULT_MAX_STEPS)
            try:
                saved = _saved_episodes(store, backend.task)
                while saved < episodes:
                    seed = progress.get(str(task_id), 0)
                    if seed >= max_attempts:
                        raise RuntimeError(f"task {task_id}: only {saved} successful episodes in {max_attempts} seeds")
                    graphs: list[dict[str, Graph]] = []
                    success, frames = record_episode(backend, store, seed, (width, height), safety, graphs)
                    if success:
                        append_reference_graphs(root, "ground_truth", store.commit() - 1, graphs)
                        saved += 1
                        log.info("task %d seed %d: saved (%d frames)", task_id, seed, frames)
                    else:
                        store.discard()
                        log.info("task %d seed %d: the expert failed; discarded", task_id, seed)
                    progress[str(task_id)] = seed + 1
                    _save_progress(root, progress)
            finally:
                backend.close()
    finally:
        store.close()
    return root


def _saved_episodes(store, task: str) -> int:
    """Episodes of the dataset whose task is `task`."""
    episodes = store.dataset.meta.episodes
    if episodes is None or not len(episodes):
        return 0
    return sum(task in tasks for tasks in episodes["tasks"])
