"""Messages <-> the core's types, for every node of the evaluation: scene states, robot states, step status,
episode records, key-value options. Typed fields only (no opaque payload): a recorded bag decodes from the
`.msg` files alone, and every float64 array crosses bit for bit, so a scene rebuilt from a message makes a
scripted policy decide exactly as the original does."""

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from sensor_msgs.msg import JointState

from sgvla.core.episode import EpisodeRecord
from sgvla.core.state import Boxes, RobotState, SceneState
from sgvla.scene_graph import Camera, GeomBatch
from sgvla_interfaces.msg import CameraView, GeomBox, KeyValue, StepStatus
from sgvla_interfaces.msg import EpisodeRecord as EpisodeRecordMsg
from sgvla_interfaces.msg import SceneState as SceneStateMsg


def _f64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


# -- key-value options ----------------------------------------------------------------------------

def key_values(data: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=str(k), value=json.dumps(v, sort_keys=True)) for k, v in data.items()]


def values_of(items) -> dict[str, Any]:
    return {kv.key: json.loads(kv.value) for kv in items}


# -- scene state ------------------------------------------------------------------------------------

def _boxes(owner, centers, rotations, half_sizes) -> list[GeomBox]:
    return [GeomBox(owner=int(o), center=_f64(c), rotation=_f64(r).reshape(9), half_size=_f64(h))
            for o, c, r, h in zip(owner, centers, rotations, half_sizes, strict=True)]


def _unboxed(boxes: list[GeomBox]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n = len(boxes)
    return (np.array([b.owner for b in boxes], dtype=np.int64),
            _f64([b.center for b in boxes]).reshape(n, 3), _f64([b.rotation for b in boxes]).reshape(n, 3, 3),
            _f64([b.half_size for b in boxes]).reshape(n, 3))


def scene_msg(scene: SceneState, info: Mapping[str, Any], header, episode: int, step: int) -> SceneStateMsg:
    g = scene.geoms
    msg = SceneStateMsg(header=header, episode=int(episode), step=int(step), task_language=scene.task,
                        source=scene.source, objects=list(scene.objects), positions=_f64(scene.positions).reshape(-1))
    msg.geoms = _boxes(g.geom_object, g.centers[0], g.rotations[0], g.half_sizes)
    o = scene.obstacles
    msg.obstacles = _boxes(o.owner, o.centers, o.rotations, o.half_sizes)
    msg.cameras = [CameraView(name=name, width=int(c.width), height=int(c.height), k=_f64(c.K).reshape(9),
                              pose=_f64(c.cam_to_world).reshape(16)) for name, c in scene.cameras.items()]
    msg.eef_position, msg.eef_rotation = _f64(scene.eef_pos), _f64(scene.eef_mat).reshape(9)
    msg.gripper_positions = _f64(scene.gripper_qpos)
    target, place = info.get("goal", ("", ""))
    msg.goal_object, msg.goal_place = target, place
    msg.table_center = _f64(info.get("table_center", np.zeros(3)))
    return msg


def scene_of(msg: SceneStateMsg) -> tuple[SceneState, dict[str, Any]]:
    """(SceneState, episode facts) of a message, as the environment's backend holds them."""
    owner, centers, rotations, halves = _unboxed(msg.geoms)
    geoms = GeomBatch(geom_object=owner, centers=centers[None], rotations=rotations[None], half_sizes=halves,
                      n_objects=len(msg.objects))
    cameras = {c.name: Camera(c.name, _f64(c.k).reshape(3, 3), _f64(c.pose).reshape(4, 4), int(c.width),
                              int(c.height)) for c in msg.cameras}
    scene = SceneState(objects=tuple(msg.objects), positions=_f64(msg.positions).reshape(-1, 3), geoms=geoms,
                       cameras=cameras, eef_pos=_f64(msg.eef_position), eef_mat=_f64(msg.eef_rotation).reshape(3, 3),
                       gripper_qpos=_f64(msg.gripper_positions), task=msg.task_language,
                       obstacles=Boxes(*_unboxed(msg.obstacles)), source=msg.source)
    return scene, {"goal": (msg.goal_object, msg.goal_place), "table_center": _f64(msg.table_center)}


# -- robot state and step status --------------------------------------------------------------------

def joint_state_msg(robot: RobotState, header) -> JointState:
    return JointState(header=header, name=list(robot.names), position=_f64(robot.positions).tolist(),
                      velocity=_f64(robot.velocities).tolist())


def eef_pose_msg(robot: RobotState, header) -> PoseStamped:
    msg = PoseStamped(header=header)
    (msg.pose.position.x, msg.pose.position.y, msg.pose.position.z) = (float(v) for v in robot.eef_position)
    q = msg.pose.orientation
    q.x, q.y, q.z, q.w = (float(v) for v in robot.eef_quaternion)
    return msg


def robot_of(joints: JointState, eef: PoseStamped | None = None) -> RobotState:
    position = quaternion = None
    if eef is not None:
        p, q = eef.pose.position, eef.pose.orientation
        position, quaternion = _f64([p.x, p.y, p.z]), _f64([q.x, q.y, q.z, q.w])
    return RobotState(tuple(joints.name), _f64(joints.position), _f64(joints.velocity), position, quaternion)


def status_msg(state, header) -> StepStatus:
    """A `sgvla.nodegraph.environment.StepState` as the step's status."""
    return StepStatus(header=header, episode=int(state.episode), step=int(state.step), max_steps=int(state.max_steps),
                      success=bool(state.success), done=bool(state.done), task=state.task)


# -- episode records --------------------------------------------------------------------------------

def record_msg(record: EpisodeRecord, header=None) -> EpisodeRecordMsg:
    msg = EpisodeRecordMsg(
        policy=record.policy, task_id=int(record.task_id), perturbation=record.perturbation, mode=record.mode,
        seed=int(record.seed), success=bool(record.success), steps=int(record.steps), max_steps=int(record.max_steps),
        wall_time_s=float(record.wall_time_s), task=record.task, prompt=record.prompt, view=record.view,
        graph_source=record.graph_source, graph_triplets=int(record.graph_triplets),
        triplets_in_prompt=int(record.triplets_in_prompt), visible_objects=list(record.visible_objects),
        context_ms_per_step=float(record.context_ms_per_step), has_budget=record.prompt_tokens is not None,
        prompt_tokens=int(record.prompt_tokens or 0), prompt_budget=-1 if record.prompt_budget is None
        else int(record.prompt_budget), triplets_kept=int(record.triplets_kept or 0),
        prompt_truncated=bool(record.prompt_truncated), failure_reason=record.failure_reason,
        infra_failure=record.infra_failure, video=record.video, source_stats=key_values(record.source_stats),
        decision=key_values(record.decision), extra=key_values(record.extra), control=key_values(record.control),
        has_progress=record.progress is not None, progress=float(record.progress or 0.0),
        stages=key_values(record.stages), has_failure_class=record.failure_class is not None,
        failure_class=record.failure_class or "")
    if header is not None:
        msg.header = header
    return msg


def record_of(msg: EpisodeRecordMsg) -> EpisodeRecord:
    budget = msg.has_budget
    return EpisodeRecord(
        msg.policy, int(msg.task_id), msg.perturbation, msg.mode, int(msg.seed), success=bool(msg.success),
        steps=int(msg.steps), max_steps=int(msg.max_steps), wall_time_s=float(msg.wall_time_s), task=msg.task,
        prompt=msg.prompt, view=msg.view, graph_source=msg.graph_source, graph_triplets=int(msg.graph_triplets),
        triplets_in_prompt=int(msg.triplets_in_prompt), visible_objects=list(msg.visible_objects),
        context_ms_per_step=float(msg.context_ms_per_step), prompt_tokens=int(msg.prompt_tokens) if budget else None,
        prompt_budget=(None if msg.prompt_budget < 0 else int(msg.prompt_budget)) if budget else None,
        triplets_kept=int(msg.triplets_kept) if budget else None, prompt_truncated=bool(msg.prompt_truncated),
        failure_reason=msg.failure_reason, infra_failure=msg.infra_failure, video=msg.video,
        source_stats=values_of(msg.source_stats), decision=values_of(msg.decision), extra=values_of(msg.extra),
        control=values_of(msg.control), progress=float(msg.progress) if msg.has_progress else None,
        stages=values_of(msg.stages), failure_class=msg.failure_class if msg.has_failure_class else None)
