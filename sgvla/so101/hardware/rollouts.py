"""Every evaluated episode on the arm as a LeRobot dataset episode, so a failure can be replayed (and the rollouts
reused as training data): the layout `sgvla record` writes (`dataset_features`: ``observation.state`` and
``action`` in LeRobot units, ``observation.images.<camera>`` videos at the rig camera's size), at the episode's
control rate, written by `EpisodeStore` (whole episodes only; a save interrupted by a kill is rolled back when
the dataset is next opened, and the frames of an episode never saved are dropped).

One frame per control step of the run phase (not the homing): the state the policy observed, the goal it sent
(before the arm's safety layer clamps it, as the hardware recorder stores topics' goals) and the camera images it
saw. An episode is saved once the operator's verdict is in, so an episode cut short (a kill, an infrastructure
failure) leaves nothing. Invalid (redo) episodes are saved too and marked: each saved episode gets a line in
``sgvla_rollouts.jsonl`` at the dataset's root (episode index, the episode's key, verdict, ``valid``), written
after the save. The evaluation's records are what count: a dataset episode that no record names was saved by a
run killed before its record was written (the episode is run again under a new index).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from sgvla.so101.hardware.joints import JOINTS
from sgvla.so101.hardware.recording import EpisodeStore, dataset_features

INDEX = "sgvla_rollouts.jsonl"  # per saved episode: its index, key, verdict, valid


class RolloutStore:
    """The rollouts dataset at ``root``: `begin` an episode, `add` a frame per control step, `save` it with its
    facts (or `discard` it). ``cameras`` maps a rig camera name to its (height, width)."""

    def __init__(self, root: str | Path, fps: float, cameras: Mapping[str, tuple[int, int]],
                 repo_id: str = "local/so101_eval_rollouts") -> None:
        if round(fps) != fps or fps <= 0:
            raise ValueError(f"rollouts are a LeRobot dataset, whose fps is a whole number; the control rate is "
                             f"{fps:g} Hz")
        self.root, self.cameras = Path(root), dict(cameras)
        self.store = EpisodeStore(self.root, repo_id, int(fps),
                                  dataset_features({n: (h, w, False) for n, (h, w) in self.cameras.items()}))
        self.task = ""

    @property
    def frames(self) -> int:
        return self.store.frames

    def begin(self, task: str) -> None:
        """A new episode (the frames of one not saved are dropped); ``task`` is every frame's task."""
        self.store.discard()
        self.task = task

    def add(self, state: Mapping[str, float], action: Mapping[str, float], images: Mapping[str, np.ndarray]) -> None:
        """One control step: joints in LeRobot units by name, upright RGB images by camera name."""
        frame: dict[str, Any] = {"observation.state": np.array([state[j] for j in JOINTS], np.float32),
                                 "action": np.array([action[j] for j in JOINTS], np.float32), "task": self.task}
        for name, (height, width) in self.cameras.items():
            image = images[name]
            if image.shape != (height, width, 3):
                raise ValueError(f"camera {name}: a {image.shape[1]}x{image.shape[0]} image; the rig config (and the "
                                 f"rollouts dataset) has it at {width}x{height}")
            frame[f"observation.images.{name}"] = image
        self.store.add(frame)

    def save(self, facts: Mapping[str, Any]) -> dict[str, Any]:
        """Save the episode whole, then its line in the index; returns what its record holds about it."""
        frames = self.store.frames
        total = self.store.commit()
        entry = {"episode_index": total - 1, "frames": frames, **facts}
        with open(self.root / INDEX, "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return {"rollout_dataset": str(self.root), "rollout_episode": total - 1, "rollout_frames": frames}

    def discard(self) -> None:
        self.store.discard()

    def close(self) -> None:
        self.store.close()


def rollout_index(root: str | Path) -> list[dict[str, Any]]:
    """The lines of a rollouts dataset's index (one per saved episode, in saving order)."""
    path = Path(root) / INDEX
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
