"""LIBERO's HDF5 demonstration layout, and the scene-graph annotations sgvla adds to it.

LIBERO (``scripts/create_dataset.py``)::

    data                       attrs: problem_info (JSON: problem_name, domain_name, language_instruction),
                                      env_name, env_args (JSON), bddl_file_name, bddl_file_content,
                                      macros_image_convention, num_demos, total
    data/demo_<i>              attrs: num_samples, model_file (MuJoCo XML), init_state
        actions (T, 7)  states (T, 1 + nq + nv)  robot_states (T, 9)  rewards (T,)  dones (T,)
        obs/agentview_rgb (T, H, W, 3)  obs/eye_in_hand_rgb  obs/ee_states (T, 6)  obs/ee_pos  obs/ee_ori
        obs/gripper_states (T, 2)  obs/joint_states (T, 7)

Images are stored as rendered (rows bottom-up). ``states[t]`` is the simulator
state of frame ``t``. Annotations, per view ``V`` in :data:`VIEWS`, in ``obs``:

    V_scene_graph    (T,) variable-length UTF-8: a JSON list of sorted [subject, relation, object]
    V_boxes          (T, N, 4) int32 [x1, y1, x2, y2] in the stored-image convention, -1 where invisible
    object_positions (T, N, 3) float64 world positions

with ``data.attrs["sgvla_objects"]`` (JSON list of the N names, column order) and
``data.attrs["sgvla_annotation_version"]``.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py

DATA = "data"
VIEWS = ("agentview", "robot0_eye_in_hand")
IMAGE_KEYS = {"agentview": "agentview_rgb", "robot0_eye_in_hand": "eye_in_hand_rgb"}
POSITIONS_KEY = "object_positions"
OBJECTS_ATTR = "sgvla_objects"
VERSION_ATTR = "sgvla_annotation_version"
ANNOTATION_VERSION = "1"
STRING = h5py.string_dtype("utf-8")


def scene_graph_key(view: str) -> str:
    return f"{view}_scene_graph"


def boxes_key(view: str) -> str:
    return f"{view}_boxes"


def demo_names(data: h5py.Group) -> list[str]:
    """``demo_<i>`` groups in numeric order."""
    names = [k for k in data if k.startswith("demo_") and k[5:].isdigit()]
    return sorted(names, key=lambda k: int(k[5:]))


def task_language(data: h5py.Group) -> str:
    """``problem_info["language_instruction"]``, as LIBERO stores it (a JSON string attribute)."""
    raw = data.attrs.get("problem_info")
    if raw is None:
        return ""
    info = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
    language = info.get("language_instruction", "")
    return " ".join(language) if isinstance(language, list) else str(language)


def partial_path(path: Path) -> Path:
    """Where an output is built before its atomic rename; an interrupted run resumes from it."""
    return path.with_name(path.name + ".partial")
