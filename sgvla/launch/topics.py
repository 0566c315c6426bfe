"""The node graphs' interface tables: each topic's name, type, QoS, frame id, who publishes and subscribes, and
what it carries; per launch, what each node does. The README's tables are `sgvla launch <name> --table`
(`sgvla.launch.plan.topic_table`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    name: str  # relative to the launch namespace unless absolute; {camera} stands for each camera
    type: str
    qos: str  # a QOS key
    frame_id: str
    publishers: tuple[str, ...]
    subscribers: tuple[str, ...]
    what: str


TOPICS = (
    Topic("/clock", "rosgraph_msgs/msg/Clock", "clock", "", ("sim_bridge",), (),
          "simulation time: control steps x the control period, monotonic across episodes"),
    Topic("sim/status", "sgvla_interfaces/msg/StepStatus", "control", "", ("sim_bridge",), ("vla_policy",),
          "per (episode, step): success, done, the step limit, the prompt; an environment error ends the episode"),
    Topic("sim/scene", "sgvla_interfaces/msg/SceneState", "control", "world", ("sim_bridge",),
          ("scene_graph", "vla_policy"), "privileged, optional: objects, their geometry, cameras, end effector and "
                                         "goal per (episode, step), float64 throughout; scripted policies read it"),
    Topic("joint_states", "sensor_msgs/msg/JointState", "control", "", ("sim_bridge",), ("vla_policy",),
          "arm joints and gripper fingers: position, velocity (learned policies' robot state)"),
    Topic("eef_pose", "geometry_msgs/msg/PoseStamped", "control", "world", ("sim_bridge",), ("vla_policy",),
          "the end effector by forward kinematics (learned policies' robot state)"),
    Topic("action", "sgvla_interfaces/msg/Action", "control", "", ("vla_policy",), ("sim_bridge",),
          "the policy's action for (episode, step); lock-step advances on it"),
    Topic("objects", "sgvla_interfaces/msg/ObjectStates", "reliable", "world", ("sim_bridge",), (),
          "object positions and world-aligned bounding boxes"),
    Topic("task", "std_msgs/msg/String", "latched", "", ("sim_bridge",), (),
          "the episode's task prompt (after any prompt override)"),
    Topic("camera/{camera}/image_raw", "sensor_msgs/msg/Image", "frames", "{camera}_optical_frame", ("sim_bridge",),
          ("vla_policy", "scene_graph"),
          "rgb8, upright (the simulator's rows turned 180 degrees, as policies and VLMs see them); "
          "published when the episode renders images; vla_policy reads them for learned policies, scene_graph "
          "for overlays"),
    Topic("camera/{camera}/camera_info", "sensor_msgs/msg/CameraInfo", "frames", "{camera}_optical_frame",
          ("sim_bridge",), (), "pinhole intrinsics of the published image, no distortion"),
    Topic("scene_graph/{camera}", "sgvla_interfaces/msg/SceneGraph", "reliable", "world", ("scene_graph",), (),
          "graph of the camera's visible objects in the scene: source=ground_truth for the simulator's state, "
          "source=fiducial for a perceived one (the twin suite's perception: true)"),
    Topic("graph_context/{camera}", "sgvla_interfaces/msg/GraphContext", "control", "world", ("scene_graph",),
          ("vla_policy",), "graph, boxes and serialized context text per (episode, step); vla_policy reads the "
                           "episode's view"),
    Topic("scene_graph/{camera}/overlay", "sensor_msgs/msg/Image", "sensor", "{camera}_optical_frame",
          ("scene_graph",), (), "the camera image with boxes and the manipulated object's triplets drawn"),
    Topic("scene_graph/markers", "visualization_msgs/msg/MarkerArray", "reliable", "world", ("scene_graph",), (),
          "scene_markers=true, while anything subscribes, at most 5 a second: each object's box and name, an "
          "arrow per triplet of each camera's graph (namespace <source>/relations/<camera>) with its relation at "
          "the middle, the episode's target and place highlighted; each message the whole picture (stable ids, "
          "DELETE for what went away)"),
    Topic("prompt", "sgvla_interfaces/msg/PromptContext", "reliable", "", ("vla_policy",), (),
          "the composed prompt, when it changes"),
    Topic("eval/result", "sgvla_interfaces/msg/EpisodeRecord", "reliable", "", ("evaluator",), (),
          "per finished episode: its record (a result, or an infrastructure failure)"),
    Topic("run_episode", "sgvla_interfaces/action/RunEpisode", "action", "", ("vla_policy",), ("evaluator",),
          "action: goal = the episode spec (policy and options, task, perturbation, mode, seed, suite), feedback = "
          "the step, result = the episode's record"),
    Topic("reset_episode", "sgvla_interfaces/srv/ResetEpisode", "service", "", ("sim_bridge",), ("vla_policy",),
          "service: reset (suite and options, task, perturbation, seed) for an episode number"),
)


NODE_ROLES = {
    "sim_bridge": "owns a simulated suite's backend (LIBERO, the SO101 twin; from the reset's registered suite): robot state, "
                  "images, clock, step status, the privileged scene; steps on actions (lock-step or free-running); "
                  "serves reset_episode",
    "scene_graph": "live graph per camera from the scene (the simulator's or the perceived one); serialized "
                   "context; overlays",
    "vla_policy": "serves run_episode: resets the environment and steps the episode engine (prompt per context "
                  "mode, the policy: scripted or LeRobot VLA) from the topics; returns the record",
    "evaluator": "runs the plan of `sgvla eval` as run_episode goals and writes the same JSONL records and report",
    "bag_recorder": "with `--record`: every topic into a rosbag2 folder (MCAP)",
    "vlm_query": "camera image in, SceneGraph (source=vlm) out (not in sim_eval yet)",
}
# Endpoints of nodes whose topic names are parameters.
OTHER_ENDPOINTS = {"bag_recorder": ("-", "every topic (or its `topics`)"),
                   "vlm_query": ("`scene_graph` (parameter `topic`)", "`image` (parameter `image_topic`)")}

PERCEPTION_OBJECTS = Topic(
    "perception/objects", "sgvla_interfaces/msg/ObjectStates", "reliable", "base_link", ("fiducial_graphs",), (),
    "perception=true: each tracked object's pose from the cameras' fiducial markers (kept through short occlusions, "
    "following the closed gripper while carried), its configured extent's box, per camera whether it shows and its "
    "box")

# The hardware launch's graph (`hardware`): the SO101 rig, or its MuJoCo twin speaking the same topics.
# Its own table: TOPICS/NODE_ROLES describe sim_eval (the README's table and sim_eval's graph check).
HARDWARE_TOPICS = (
    Topic("joint_states", "sensor_msgs/msg/JointState", "sensor", "", ("so101_arm", "so101_twin"),
          ("dataset_recorder", "fiducial_graphs"), "follower joints (URDF names), radians; the gripper's 0..100 % mapped onto its "
                                 "URDF limits; at the rig's control rate"),
    Topic("joint_commands", "sensor_msgs/msg/JointState", "commands", "", (), ("so101_arm", "so101_twin"),
          "goals in radians, any subset of joints; clamped to the limits, at most max_step per tick ahead, held "
          "after command_timeout_s without one; with teleop=leader remapped to leader/joint_states"),
    Topic("leader/joint_states", "sensor_msgs/msg/JointState", "commands", "", ("so101_leader",),
          ("so101_arm", "so101_twin", "dataset_recorder"), "the leader arm's joints (radians): teleoperation goals "
                                                           "and the dataset's action"),
    Topic("{camera}/image_raw", "sensor_msgs/msg/Image", "sensor", "{camera}_optical_frame", ("camera", "so101_twin"),
          ("dataset_recorder", "fiducial_graphs"), "rgb8 at the camera's fps (twin: rendered upright)"),
    Topic("{camera}/camera_info", "sensor_msgs/msg/CameraInfo", "sensor", "{camera}_optical_frame",
          ("camera", "so101_twin"), ("fiducial_graphs",), "intrinsics at the stream's resolution (calibration file; "
                                                          "twin: the model's)"),
    Topic("{camera}/depth/image_raw", "sensor_msgs/msg/Image", "sensor", "{camera}_optical_frame",
          ("camera", "so101_twin"), ("dataset_recorder", "fiducial_graphs"), "depth cameras only: 16UC1 millimetres, "
                                                                             "pixel-aligned with color"),
    Topic("{camera}/depth/camera_info", "sensor_msgs/msg/CameraInfo", "sensor", "{camera}_optical_frame",
          ("camera", "so101_twin"), (), "depth cameras only: the color camera's intrinsics"),
    Topic("scene_graph/{camera}", "sgvla_interfaces/msg/SceneGraph", "reliable", "world / base_link",
          ("so101_twin", "fiducial_graphs"), (),
          "the camera's visible objects' graph: the twin's ground truth (source=ground_truth, world); with "
          "perception=true the perceived objects' (source=fiducial, base_link), by the same projection and relation "
          "rules"),
    Topic("scene_graph/{camera}/overlay", "sensor_msgs/msg/Image", "sensor", "{camera}_optical_frame",
          ("so101_twin", "fiducial_graphs"), (), "while anything subscribes: the camera's graph drawn on its image "
                                                 "(boxes and the target's triplets; twin: its newest image)"),
    Topic("scene_graph/markers", "visualization_msgs/msg/MarkerArray", "reliable", "world / base_link",
          ("so101_twin", "fiducial_graphs"), (),
          "scene_markers=true, while anything subscribes, at most 5 a second: each object's box and name, an "
          "arrow per triplet of each camera's graph with its relation at the middle, the target bowl highlighted; "
          "the twin's ground truth (namespaces ground_truth/..., world), the perceived objects' (fiducial/..., "
          "base_link)"),
    PERCEPTION_OBJECTS,
    Topic("task", "std_msgs/msg/String", "latched", "", ("so101_twin",), ("dataset_recorder", "fiducial_graphs"),
          "twin only: the task prompt of its task_id (the recorder's task when `task` is empty)"),
    Topic("twin/reset", "std_msgs/msg/Int64", "reliable", "", ("dataset_recorder",), ("so101_twin",),
          "twin only: a seed; the objects are placed again and the arm goes to rest (the recorder sends one "
          "after each episode)"),
    Topic("record_control", "std_msgs/msg/String", "reliable", "", (), ("dataset_recorder",),
          "operator commands: start, save, toggle, rerecord, abort, quit"),
)

HARDWARE_NODE_ROLES = {
    "so101_arm": "the follower arm (LeRobot SO101Follower): joint states out, safe position goals in",
    "so101_leader": "the leader arm, moved by hand: its joints as goals",
    "camera": "one rig camera (OpenCV, RealSense with aligned depth, synthetic): image, depth, camera_info",
    "so101_twin": "sim=true: the SO101 MuJoCo twin in real time instead of arm and cameras, the same topics, "
                  "plus ground-truth scene graphs and the task",
    "dataset_recorder": "record=DIR: joint states, goals and camera images sampled at the control rate into a "
                        "LeRobot dataset (the layout of `sgvla record`); the launch ends when it is done",
    "fiducial_graphs": "perception=true: object poses from the cameras' fiducial markers (detection, PnP, depth, the "
                       "wrist camera by forward kinematics, fusion, tracking) and each camera's graph of them",
}

# The evaluation on the physical arm (`so101_eval`, sim=false): the arm, the rig's cameras, the operator's protocol.
# With sim=true so101_eval is sim_eval's graph on the twin (TOPICS, NODE_ROLES).
PERCEPTION_OBJECTS_EVAL = Topic(
    PERCEPTION_OBJECTS.name, PERCEPTION_OBJECTS.type, PERCEPTION_OBJECTS.qos, PERCEPTION_OBJECTS.frame_id,
    PERCEPTION_OBJECTS.publishers, ("arm_policy",), PERCEPTION_OBJECTS.what + "; policies that read object positions "
                                                                             "(prompt_grounded) read them")
SO101_EVAL_TOPICS = (
    Topic("joint_states", "sensor_msgs/msg/JointState", "sensor", "", ("so101_arm",), ("arm_policy", "fiducial_graphs"),
          "follower joints (URDF names), radians, at the rig's control rate; arm_policy's robot state"),
    Topic("joint_commands", "sensor_msgs/msg/JointState", "commands", "", ("arm_policy",), ("so101_arm",),
          "the home pose's goals (at most home_step_deg per tick) and the policy's; clamped to the limits, at most "
          "max_step per tick ahead, held after command_timeout_s without one"),
    Topic("{camera}/image_raw", "sensor_msgs/msg/Image", "sensor", "{camera}_optical_frame", ("camera",),
          ("arm_policy", "fiducial_graphs"), "rgb8 at the camera's fps: what learned policies see (the cameras their "
          "checkpoint names), the episodes' rollouts, perception, the bag"),
    Topic("{camera}/camera_info", "sensor_msgs/msg/CameraInfo", "sensor", "{camera}_optical_frame", ("camera",),
          ("fiducial_graphs",), "intrinsics at the stream's resolution"),
    Topic("{camera}/depth/image_raw", "sensor_msgs/msg/Image", "sensor", "{camera}_optical_frame", ("camera",),
          ("fiducial_graphs",), "depth cameras only: 16UC1 millimetres, pixel-aligned with color"),
    Topic("scene_graph/{camera}", "sgvla_interfaces/msg/SceneGraph", "reliable", "base_link", ("fiducial_graphs",),
          ("arm_policy",), "perception=true: the perceived objects' graph (source=fiducial), the live graph of graph "
                           "modes"),
    PERCEPTION_OBJECTS_EVAL,
    Topic("scene_graph/{camera}/overlay", "sensor_msgs/msg/Image", "sensor", "{camera}_optical_frame",
          ("fiducial_graphs",), (), "perception=true, while anything subscribes: the camera's perceived graph drawn "
                                    "on the image it was perceived in"),
    Topic("scene_graph/markers", "visualization_msgs/msg/MarkerArray", "reliable", "base_link", ("fiducial_graphs",),
          (), "perception=true, scene_markers=true, while anything subscribes, at most 5 a second: each perceived "
              "object's box and name, an arrow per triplet of each camera's graph with its relation at the middle, "
              "the target bowl highlighted"),
    Topic("task", "std_msgs/msg/String", "latched", "", ("arm_policy",), ("fiducial_graphs",),
          "the running episode's prompt (fiducial_graphs' relation rules key on it)"),
    Topic("eval/operator", "std_msgs/msg/String", "latched", "", ("arm_policy",), (),
          "the operator's lines: `confirm episode N: <task, perturbation, policy, seed; the mode unless blind>`, "
          "`running episode N`, `verdict episode N: ...`, `recorded episode N: ...`, refusals of bad input"),
    Topic("eval/confirm", "std_msgs/msg/String", "reliable", "", (), ("arm_policy",),
          "operator: `start` (or empty) once the scene is set; `stop` ends the running episode"),
    Topic("eval/verdict", "std_msgs/msg/String", "reliable", "", (), ("arm_policy",),
          "operator: `success|failure|invalid [note]`; invalid episodes are run again"),
    Topic("eval/result", "sgvla_interfaces/msg/EpisodeRecord", "reliable", "", ("evaluator",), (),
          "per finished episode: its record (the verdict, its source, note, home-pose error, timings in extra)"),
    Topic("run_episode", "sgvla_interfaces/action/RunEpisode", "action", "", ("arm_policy",), ("evaluator",),
          "action: goal = the episode spec, result = the episode's record"),
)

SO101_EVAL_NODE_ROLES = {
    "so101_arm": HARDWARE_NODE_ROLES["so101_arm"],
    "camera": "one rig camera (with cameras=true): image, camera_info",
    "arm_policy": "serves run_episode on the arm: home pose at bounded speed, the operator's confirm, the episode "
                  "engine at the control rate on joint states (learned policies: and the cameras' images, chunks "
                  "computed while the current one plays; with perception: the perceived objects and graph), the "
                  "operator's verdict; returns the record; saves each episode's rollout as a LeRobot dataset episode "
                  "(`<output_dir>/rollouts`)",
    "fiducial_graphs": HARDWARE_NODE_ROLES["fiducial_graphs"],
    "evaluator": NODE_ROLES["evaluator"] + " (counterbalanced order; invalid verdicts redone at once)",
    "bag_recorder": NODE_ROLES["bag_recorder"],
}


def subscriber_counts(nodes: Iterable, topics: tuple[str, ...], table: tuple[Topic, ...] = TOPICS) -> list[str]:
    """`topic:n` for the evaluator's start condition: n subscriptions the plan's nodes make to the topic (a
    recorder included: it must see the first episode's messages too)."""
    names = {n.executable for n in nodes}
    out = []
    for t in table:
        if t.name in topics:
            n = sum(s in names for s in t.subscribers) + ("bag_recorder" in names)
            out.append(f"{t.name}:{n}")
    return out

