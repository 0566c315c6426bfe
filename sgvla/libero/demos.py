"""``sgvla demos generate``: scripted-expert demonstrations in LIBERO's HDF5 layout.

One file per task (``<task name>_demo.hdf5``, LIBERO's naming). Only successful
episodes become demos, each written whole and flushed before the next starts,
into ``<file>.partial``; the file gets its final name once it holds the
requested number of demos. A rerun resumes: finished demos stay, a demo left
half-written is dropped, and seeds continue where the last run stopped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np
from tqdm import tqdm

from sgvla.libero.hdf5 import DATA, IMAGE_KEYS, VIEWS, demo_names, partial_path

NEXT_SEED_ATTR = "sgvla_next_seed"


@dataclass
class Episode:
    """Frame ``t``: the observation and simulator state before ``actions[t]``."""

    seed: int
    init_state_index: int
    model_xml: str
    success: bool = False
    states: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    images: dict[str, list[np.ndarray]] = field(default_factory=lambda: {v: [] for v in VIEWS})
    proprio: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.actions)


def record_episode(backend, seed: int) -> Episode:
    """Run the task's scripted expert from ``seed`` and record every frame."""
    from robosuite.utils.transform_utils import quat2axisangle

    from sgvla.libero.expert import task_expert

    obs = backend.reset(seed)
    expert = task_expert(backend.task_info.problem)
    episode = Episode(seed, backend.env.init_state_index, backend.sim.model.get_xml())
    done = False
    while not done:
        scene = backend.scene()
        action = expert.act(scene)
        robot = obs.raw["robot_state"]
        eef = np.r_[robot["eef"]["pos"], quat2axisangle(robot["eef"]["quat"])]
        for key, value in (("ee_states", eef), ("gripper_states", robot["gripper"]["qpos"]),
                           ("joint_states", robot["joints"]["pos"]),
                           ("robot_states", np.r_[robot["gripper"]["qpos"], robot["eef"]["pos"], robot["eef"]["quat"]])):
            episode.proprio.setdefault(key, []).append(np.asarray(value, dtype=np.float64))
        for view in VIEWS:
            episode.images[view].append(obs.images[view])
        episode.states.append(backend.sim.get_state().flatten())
        episode.actions.append(action)
        obs, episode.success, done = backend.step(action)
    return episode


def _init_file(data: h5py.Group, backend) -> None:
    from libero.libero.envs import TASK_MAPPING
    from libero.libero.envs.bddl_utils import get_problem_info

    task = backend.task_info
    bddl_file = backend.env._task_bddl_file
    problem = get_problem_info(bddl_file)
    env_name = TASK_MAPPING[problem["problem_name"]].__name__
    env_kwargs = {"bddl_file_name": bddl_file, "camera_names": list(VIEWS), "camera_heights": backend.config.image_size,
                  "camera_widths": backend.config.image_size, "control_freq": backend.env.control_freq}
    data.attrs["problem_info"] = json.dumps({**problem, "language_instruction": backend.task})
    data.attrs["env_name"] = env_name
    data.attrs["env_args"] = json.dumps({"type": 1, "env_name": env_name, "bddl_file": bddl_file, "env_kwargs": env_kwargs})
    data.attrs["bddl_file_name"] = bddl_file
    data.attrs["bddl_file_content"] = Path(bddl_file).read_text(encoding="utf-8")
    data.attrs["macros_image_convention"] = "opengl"
    data.attrs["sgvla_task_id"] = task.task_id
    data.attrs["sgvla_goal"] = json.dumps(task.problem.goal_placements)
    data.attrs["sgvla_perturbation"] = backend.perturbations.name
    data.attrs["sgvla_render_profile"] = backend.config.render_profile
    data.attrs["num_demos"] = 0
    data.attrs["total"] = 0
    data.attrs[NEXT_SEED_ATTR] = 0


def write_demo(data: h5py.Group, name: str, episode: Episode) -> None:
    """One demo group; ``num_samples`` is written last and marks it complete."""
    group = data.create_group(name)
    obs = group.create_group("obs")
    for view in VIEWS:
        obs.create_dataset(IMAGE_KEYS[view], data=np.stack(episode.images[view]), compression="gzip", compression_opts=4)
    for key, values in episode.proprio.items():
        (group if key == "robot_states" else obs).create_dataset(key, data=np.stack(values))
    obs.create_dataset("ee_pos", data=obs["ee_states"][:, :3])
    obs.create_dataset("ee_ori", data=obs["ee_states"][:, 3:])
    states = np.stack(episode.states)
    group.create_dataset("states", data=states)
    group.create_dataset("actions", data=np.stack(episode.actions))
    ends = np.zeros(len(episode), dtype=np.uint8)
    ends[-1] = 1
    group.create_dataset("rewards", data=ends)
    group.create_dataset("dones", data=ends)
    group.attrs["model_file"] = episode.model_xml
    group.attrs["init_state"] = states[0]
    group.attrs["sgvla_seed"] = episode.seed
    group.attrs["sgvla_init_state_index"] = episode.init_state_index
    group.attrs["num_samples"] = len(episode)


def output_file(out: Path, task_name: str, n_tasks: int) -> Path:
    if out.suffix in (".hdf5", ".h5"):
        if n_tasks != 1:
            raise ValueError(f"--out {out} is one file but {n_tasks} tasks were asked; give a directory")
        return out
    return out / f"{task_name}_demo.hdf5"


def generate_task(task_id: int, episodes: int, out: Path, *, render_profile: str = "reference", image_size: int = 128,
                  perturbation: str = "none", max_attempts: int | None = None, progress: bool = True) -> Path:
    """Demos of one task into ``out`` (a file); resumes ``out.partial``; returns the finished file."""
    from sgvla.libero.env import make_backend

    partial = partial_path(out)
    if out.is_file():
        with h5py.File(out, "r") as f:
            if len(demo_names(f[DATA])) >= episodes:
                return out
        os.replace(out, partial)  # asked for more demos than the finished file has: extend it
    out.parent.mkdir(parents=True, exist_ok=True)
    max_attempts = max_attempts or 3 * episodes
    with make_backend(task_id, render_profile=render_profile, image_size=image_size, perturbation=perturbation) as backend:
        if backend.cameras != VIEWS:
            raise ValueError(f"perturbation {perturbation!r} changes task {task_id}'s cameras to {backend.cameras}; "
                             f"demos record LIBERO's {VIEWS}")
        with h5py.File(partial, "a") as f:
            data = f.require_group(DATA)
            if "problem_info" not in data.attrs:
                _init_file(data, backend)
            for name in demo_names(data):
                if "num_samples" not in data[name].attrs:
                    del data[name]  # interrupted while being written
            done = len(demo_names(data))
            bar = tqdm(total=episodes, initial=done, desc=f"task {task_id} demos", disable=not progress, unit="demo")
            while done < episodes:
                seed = int(data.attrs[NEXT_SEED_ATTR])
                if seed >= max_attempts:
                    raise RuntimeError(f"task {task_id}: only {done} successful episodes in {max_attempts} seeds")
                episode = record_episode(backend, seed)
                if episode.success:
                    write_demo(data, f"demo_{done}", episode)
                    done += 1
                    data.attrs["num_demos"] = done
                    data.attrs["total"] = int(data.attrs["total"]) + len(episode)
                    bar.update()
                data.attrs[NEXT_SEED_ATTR] = seed + 1
                f.flush()
            bar.close()
    os.replace(partial, out)
    return out


def generate(task_ids: list[int], episodes: int, out: Path, **kwargs) -> list[Path]:
    from sgvla.libero.tasks import task_info

    return [generate_task(t, episodes, output_file(out, task_info(t).name, len(task_ids)), **kwargs) for t in task_ids]
