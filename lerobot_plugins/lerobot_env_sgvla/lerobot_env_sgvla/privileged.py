"""The privileged state a scripted policy reads, as one observation key of the env (``--env.privileged=true``).

sgvla's scripted policies (`expert`, `prompt_grounded`: `sgvla.policies.scripted`) act on the simulator's scene
and the task's facts, which LeRobot's evaluation loop has no channel for: it hands a policy the observation batch
and the task strings only. So the env adds one observation, `PRIVILEGED_KEY`, that holds exactly what they read:

- the scene (`sgvla.core.state.SceneState`): objects, their positions, their geoms' boxes, the end effector's pose,
  the gripper's joints, the obstacles' boxes, the suite's task language, the scene's source; not the cameras (no
  scripted policy reads them; their images are the observation's own);
- the episode's facts the engine tells a scripted policy (`Backend.episode_info`): the goal (target, place) and the
  table's centre;
- the episode's identity: a key unique to the episode (env instance and reset count), its task id and seed, the
  step, the suite (whose pick-and-place controller the policies drive), its ontology and the env type (whose
  units the policy's actions are given in: `SgvlaEnvConfig.env_action`); a policy keeps its per-episode state under that key, so no episode ever reads another's (LeRobot issue
  4327: parallel tasks shared one action queue), whatever the batch index, thread or process.

Encoding: LeRobot's `preprocess_observation` turns every extra array into a float32 tensor, which would round the
scene's float64 values (a scripted policy would then act on other numbers than in `sgvla eval`). The state is
therefore bytes: a JSON header (names, strings, ids, array shapes) and the float64 arrays, little-endian, in a
fixed-size uint8 vector (a vector env stacks equal shapes) led by the payload's length. A byte is exact in float32,
so `unpack` rebuilds every float64 bit for bit.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from sgvla.core.state import Boxes, SceneState
from sgvla.scene_graph import GeomBatch

PRIVILEGED_KEY = "sgvla_privileged"  # the env's observation key; a policy reads "observation.sgvla_privileged"
CAPACITY = 1 << 17  # bytes: a LIBERO-Spatial scene packs into ~45 KB
_LENGTH = 8  # bytes of the leading payload length


def pack(scene: SceneState, info: dict[str, Any], episode: dict[str, Any]) -> np.ndarray:
    """The uint8 vector of `CAPACITY` bytes holding `scene`, the episode facts `info` (goal, table_center) and the
    episode's identity `episode` (key, task_id, seed, step)."""
    g, o = scene.geoms, scene.obstacles
    arrays = {"positions": scene.positions, "geom_centers": g.centers[0], "geom_rotations": g.rotations[0],
              "geom_half_sizes": g.half_sizes, "eef_pos": scene.eef_pos, "eef_mat": scene.eef_mat,
              "gripper_qpos": scene.gripper_qpos, "obstacle_centers": o.centers, "obstacle_rotations": o.rotations,
              "obstacle_half_sizes": o.half_sizes, "table_center": info["table_center"]}
    arrays = {k: np.ascontiguousarray(v, dtype="<f8") for k, v in arrays.items()}
    header = {"episode": episode, "objects": list(scene.objects), "task": scene.task, "source": scene.source,
              "goal": list(info["goal"]), "geom_object": np.asarray(g.geom_object).tolist(),
              "n_objects": int(g.n_objects), "obstacle_owner": np.asarray(o.owner).tolist(),
              "arrays": [[k, list(v.shape)] for k, v in arrays.items()]}
    head = json.dumps(header, separators=(",", ":")).encode()
    payload = b"".join([np.uint32(len(head)).astype("<u4").tobytes(), head, *(v.tobytes() for v in arrays.values())])
    if _LENGTH + len(payload) > CAPACITY:
        raise ValueError(f"the scene's privileged state takes {len(payload)} bytes, more than the {CAPACITY} the "
                         f"env's {PRIVILEGED_KEY} observation holds")
    out = np.zeros(CAPACITY, dtype=np.uint8)
    out[:_LENGTH] = np.frombuffer(np.uint64(len(payload)).astype("<u8").tobytes(), dtype=np.uint8)
    out[_LENGTH:_LENGTH + len(payload)] = np.frombuffer(payload, dtype=np.uint8)
    return out


def unpack(values) -> tuple[SceneState, dict[str, Any], dict[str, Any]]:
    """(scene, info, episode) of one env's `PRIVILEGED_KEY` observation: the uint8 vector, or its float32 copy as a
    LeRobot policy receives it (one row of ``batch["observation.sgvla_privileged"]``)."""
    raw = np.asarray(values)
    if raw.dtype != np.uint8:
        raw = np.asarray(raw, dtype=np.float64)
        if raw.min(initial=0) < 0 or raw.max(initial=0) > 255 or not np.all(raw == np.rint(raw)):
            raise ValueError(f"not a {PRIVILEGED_KEY} observation: its values are not bytes")
        raw = raw.astype(np.uint8)
    data = raw.reshape(-1).tobytes()
    length = int(np.frombuffer(data[:_LENGTH], dtype="<u8")[0])
    if length == 0 or _LENGTH + length > len(data):
        raise ValueError(f"not a {PRIVILEGED_KEY} observation: payload length {length} of {len(data)} bytes")
    payload = data[_LENGTH:_LENGTH + length]
    head_length = int(np.frombuffer(payload[:4], dtype="<u4")[0])
    header = json.loads(payload[4:4 + head_length])
    arrays, offset = {}, 4 + head_length
    for name, shape in header["arrays"]:
        count = int(np.prod(shape, dtype=np.int64))
        arrays[name] = np.frombuffer(payload, dtype="<f8", count=count, offset=offset).reshape(shape).astype(np.float64)
        offset += 8 * count
    geoms = GeomBatch(geom_object=np.asarray(header["geom_object"], dtype=np.intp),
                      centers=arrays["geom_centers"][None], rotations=arrays["geom_rotations"][None],
                      half_sizes=arrays["geom_half_sizes"], n_objects=header["n_objects"])
    obstacles = Boxes(np.asarray(header["obstacle_owner"], dtype=np.int64).reshape(-1),
                      arrays["obstacle_centers"].reshape(-1, 3), arrays["obstacle_rotations"].reshape(-1, 3, 3),
                      arrays["obstacle_half_sizes"].reshape(-1, 3))
    scene = SceneState(objects=tuple(header["objects"]), positions=arrays["positions"].reshape(-1, 3), geoms=geoms,
                       cameras={}, eef_pos=arrays["eef_pos"], eef_mat=arrays["eef_mat"].reshape(3, 3),
                       gripper_qpos=arrays["gripper_qpos"], task=header["task"], obstacles=obstacles,
                       source=header["source"])
    info = {"goal": tuple(header["goal"]), "table_center": arrays["table_center"]}
    return scene, info, header["episode"]
