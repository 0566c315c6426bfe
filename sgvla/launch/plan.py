"""What a launch starts: nodes, executables, parameters and remappings, per launch name.

One description read by both `launch/<name>.launch.py` (`ros2 launch sgvla_ros <name>.launch.py a:=b`) and
`sgvla launch <name> a=b`, so the two cannot drift. No ROS imports: the launch file turns a `Plan` into
launch_ros `Node` actions, `sgvla launch` into processes (or one multi-node process).

Parameters come from a ROS 2 parameter file (`config/ros/<name>.yaml`, every parameter documented) with
the launch arguments' values on top. `TOPICS` is the node graph's interface table (names, types, QoS,
frame ids, who publishes and subscribes); the README's table is `sgvla launch <name> --table`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sgvla.plugins  # noqa: F401  (the registered suites: a plan's suite sets its nodes' cameras and ontology)
from sgvla.eval.suite import SuiteConfig
from sgvla.launch.nodes import EXECUTABLES, PACKAGE, QOS, describe_qos
from sgvla.paths import resolve_data_path

@dataclass(frozen=True)
class Argument:
    name: str
    default: str
    description: str


@dataclass(frozen=True)
class NodeSpec:
    name: str  # node name (also its key in the parameter file)
    executable: str
    parameters: dict[str, Any] = field(default_factory=dict)  # on top of the parameter file
    remappings: tuple[tuple[str, str], ...] = ()

    @property
    def module(self) -> str:
        return f"{PACKAGE}.{EXECUTABLES[self.executable]}"


@dataclass(frozen=True)
class Plan:
    name: str
    arguments: dict[str, str]  # resolved launch arguments
    params_file: Path
    nodes: tuple[NodeSpec, ...]
    env: dict[str, str]  # environment defaults for every node (set only where unset)
    main: str  # the node whose exit ends the launch; its exit code is the launch's

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"launch {self.name!r} has no node {name!r}; it has {[n.name for n in self.nodes]}")


# -- the node graph's topics ----------------------------------------------------------------------

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

LAUNCH_TOPICS = {"sim_eval": (TOPICS, NODE_ROLES), "hardware": (HARDWARE_TOPICS, HARDWARE_NODE_ROLES),
                 "so101_eval": (SO101_EVAL_TOPICS, SO101_EVAL_NODE_ROLES)}


def topic_table(cameras: tuple[str, ...] = ("agentview", "robot0_eye_in_hand"), launch: str = "sim_eval") -> str:
    """The README's Markdown tables: nodes, then topics with types, QoS and frame ids (so101_eval: on the arm)."""
    topics, roles = LAUNCH_TOPICS[launch]
    rows = ["| node (executable) | role | publishes | subscribes |", "|---|---|---|---|"]
    for node, role in roles.items():
        pubs = [f"`{t.name}`" for t in topics if node in t.publishers]
        subs = [f"`{t.name}`" for t in topics if node in t.subscribers]
        pubs_text, subs_text = OTHER_ENDPOINTS.get(node, (", ".join(pubs) or "-", ", ".join(subs) or "-"))
        rows.append(f"| `{node}` | {role} | {pubs_text} | {subs_text} |")
    rows += ["", "| topic | type | QoS | frame_id | publisher | subscribers | what |", "|---|---|---|---|---|---|---|"]
    for t in topics:
        rows.append(f"| `{t.name}` | `{t.type}` | {t.qos} | {f'`{t.frame_id}`' if t.frame_id else '-'} | "
                    f"{', '.join(t.publishers) or '(tools, operator)'} | "
                    f"{', '.join(t.subscribers) or '(tools, recorder)'} | {t.what} |")
    rows.append("")
    rows += [f"- QoS `{name}`: {describe_qos(name)}" for name in QOS if any(t.qos == name for t in topics)
             or launch == "sim_eval"]
    if launch == "sim_eval":
        rows.append(f"- `{{camera}}`: each camera the episode observes, e.g. {', '.join(cameras)}. Every name is "
                    "relative (a launch namespace applies) except `/clock`; bag_recorder subscribes to all topics.")
    else:
        rows.append("- `{camera}`: each rig camera by its name in the rig config (arguments agentview, wrist). "
                    "Every name is relative (a launch namespace applies).")
    return "\n".join(rows)


def subscriber_counts(nodes: tuple[NodeSpec, ...], topics: tuple[str, ...], table: tuple[Topic, ...] = TOPICS
                      ) -> list[str]:
    """`topic:n` for the evaluator's start condition: n subscriptions the plan's nodes make to the topic (a
    recorder included: it must see the first episode's messages too)."""
    names = {n.executable for n in nodes}
    out = []
    for t in table:
        if t.name in topics:
            n = sum(s in names for s in t.subscribers) + ("bag_recorder" in names)
            out.append(f"{t.name}:{n}")
    return out


# -- launches -------------------------------------------------------------------------------------

ARGUMENTS: dict[str, tuple[Argument, ...]] = {
    "sim_eval": (
        Argument("eval_config", "config/eval/default.yaml", "evaluation plan (the same files as `sgvla eval`)"),
        Argument("eval_overrides", "", "key=value overrides of the plan, space-separated, e.g. 'tasks=[0] episodes=1'"),
        Argument("output_dir", "", "run directory (default: the plan's output_dir)"),
        Argument("params_file", "config/ros/sim_eval.yaml", "ROS 2 parameter file of the nodes"),
        Argument("stepping", "lockstep", "lockstep (advance on the action of the current step) | free_running"),
        Argument("render_images", "auto", "true | false | auto (true when recording): camera images and overlays"),
        Argument("record", "", "rosbag2 folder (MCAP) to record every topic into; empty: no recording"),
    ),
    "hardware": (
        Argument("config", "", "rig config name (config/hardware/) or YAML path; empty: so101, or twin with sim"),
        Argument("sim", "false", "true: the SO101 MuJoCo twin (so101_twin) instead of the follower arm and cameras"),
        Argument("teleop", "false", "false: the follower follows joint_commands | leader (or true): the leader arm "
                                    "drives it (joint_commands remapped to leader/joint_states)"),
        Argument("agentview", "agentview", "rig camera name of the agent view"),
        Argument("wrist", "wrist", "rig camera name of the wrist view"),
        Argument("task_id", "0", "sim: the twin's task (config/twin/so101_tabletop.yaml)"),
        Argument("seed", "0", "sim: seed of the twin's scene reset"),
        Argument("record", "", "LeRobot dataset folder to record into (dataset_recorder); empty: no recording"),
        Argument("task", "", "dataset task string; empty: the twin's task prompt (sim), required on hardware"),
        Argument("repo_id", "local/so101_bowls", "dataset name stored in its metadata (never pushed)"),
        Argument("episodes", "1", "episodes to record; the launch ends after them"),
        Argument("episode_time_s", "60.0", "seconds after which an episode is saved"),
        Argument("reset_time_s", "10.0", "with auto_start: seconds between episodes"),
        Argument("auto_start", "false", "start episodes without a record_control 'start'"),
        Argument("perception", "false", "true: fiducial_graphs: object poses and graphs (source=fiducial) from the "
                                        "cameras' fiducial markers"),
        Argument("params_file", "config/ros/hardware.yaml", "ROS 2 parameter file of the nodes"),
    ),
    "so101_eval": (
        Argument("sim", "false", "true: the SO101 twin unattended (sim_eval's nodes: sim_bridge, scene_graph, "
                                 "vla_policy, evaluator); false: the arm, the rig's cameras and the operator's protocol"),
        Argument("eval_config", "", "evaluation plan (the files of `sgvla eval`); empty: "
                                    "config/eval/so101_twin.yaml with sim, config/eval/so101_hardware.yaml without"),
        Argument("eval_overrides", "", "key=value overrides of the plan, space-separated, e.g. 'tasks=[0] episodes=1'"),
        Argument("output_dir", "", "run directory (default: the plan's output_dir); on the arm its rollouts/ is the "
                                   "LeRobot dataset of the episodes' rollouts"),
        Argument("config", "so101", "hardware: rig config name (config/hardware/) or YAML path"),
        Argument("cameras", "true", "hardware: start the rig's agentview and wrist camera nodes (recorded in the "
                                    "rollouts)"),
        Argument("agentview", "agentview", "hardware: rig camera name of the agent view"),
        Argument("wrist", "wrist", "hardware: rig camera name of the wrist view"),
        Argument("record", "", "rosbag2 folder (MCAP) to record every topic into; empty: no recording"),
        Argument("render_images", "auto", "sim: true | false | auto (true when recording): camera images on topics"),
        Argument("perception", "false", "hardware: fiducial_graphs (object poses and graphs from the cameras' "
                                        "markers): what graph modes and the prompt-grounded policy read on the arm "
                                        "(sim=true: the plan's suite.perception and graph_source=fiducial)"),
        Argument("params_file", "", "ROS 2 parameter file of the nodes; empty: config/ros/sim_eval.yaml with sim, "
                                    "config/ros/so101_eval.yaml without"),
    ),
}


def launch_names() -> list[str]:
    return sorted(ARGUMENTS)


def _truthy(value: str, name: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"argument {name}: expected true or false, got {value!r}")


def resolve_arguments(name: str, args: Mapping[str, str] | None = None) -> dict[str, str]:
    if name not in ARGUMENTS:
        raise ValueError(f"unknown launch {name!r}; known: {', '.join(launch_names())}")
    declared = {a.name: a.default for a in ARGUMENTS[name]}
    unknown = sorted(set(args or {}) - set(declared))
    if unknown:
        raise ValueError(f"launch {name}: unknown argument(s) {', '.join(unknown)}; "
                         f"it takes {', '.join(declared)}")
    return {**declared, **{k: str(v) for k, v in (args or {}).items()}}


def launch_plan(name: str, args: Mapping[str, str] | None = None) -> Plan:
    """The nodes of launch `name` with its arguments (strings, as `ros2 launch` gives them) resolved."""
    a = resolve_arguments(name, args)
    if name == "sim_eval":
        return _sim_eval(a)
    if name == "hardware":
        return _hardware(a)
    if name == "so101_eval":
        return _so101_eval(a)
    raise AssertionError(name)


def _sim_eval(a: dict[str, str]) -> Plan:
    if a["stepping"] not in ("lockstep", "free_running"):
        raise ValueError(f"argument stepping: lockstep or free_running, got {a['stepping']!r}")
    lockstep = a["stepping"] == "lockstep"
    record = a["record"].strip()
    render = bool(record) if a["render_images"].strip().lower() == "auto" else _truthy(a["render_images"],
                                                                                        "render_images")
    # The plan's suite says what the nodes see: its cameras (topics made at start; a learned policy reads them all)
    # and the ontology its objects are named in.
    suite = SuiteConfig.choice(_plan_suite(resolve_data_path(a["eval_config"])))
    cameras = suite.rendered()  # each node gets a list of its own: no YAML aliases in the parameter file
    nodes = [
        NodeSpec("sim_bridge", "sim_bridge", {"lockstep": lockstep, "render_images": render,
                                              "cameras": list(cameras)}),
        NodeSpec("scene_graph", "scene_graph", {"overlay": render, "ontology": suite.ontology,
                                                "cameras": list(cameras)}),
        NodeSpec("vla_policy", "vla_policy", {"lockstep": lockstep, "cameras": list(cameras)}),
    ]
    if record:
        nodes.append(NodeSpec("bag_recorder", "bag_recorder", {"output": str(Path(record).expanduser().absolute())}))
    waits = subscriber_counts(tuple(nodes), ("sim/status", "sim/scene", "action"))
    nodes.append(NodeSpec("evaluator", "evaluator", {
        "config": str(resolve_data_path(a["eval_config"])), "overrides": a["eval_overrides"],
        "output_dir": str(Path(a["output_dir"]).expanduser().absolute()) if a["output_dir"] else "",
        "wait_for_nodes": [n.name for n in nodes], "wait_for_subscribers": waits}))
    return Plan("sim_eval", a, resolve_data_path(a["params_file"]), tuple(nodes), {"MUJOCO_GL": "egl"},
                main="evaluator")


def _number(value: str, name: str, kind: type, minimum: float) -> int | float:
    try:
        number = kind(value)
    except ValueError:
        raise ValueError(f"argument {name}: expected {'an integer' if kind is int else 'a number'}, "
                         f"got {value!r}") from None
    if number < minimum:
        raise ValueError(f"argument {name}: must be >= {minimum}, got {value!r}")
    return number


def _hardware(a: dict[str, str]) -> Plan:
    sim = _truthy(a["sim"], "sim")
    teleop = a["teleop"].strip().lower()
    if teleop not in ("false", "leader", "true"):
        raise ValueError(f"argument teleop: false or leader (true = leader), got {a['teleop']!r}")
    teleop = teleop != "false"
    config = a["config"].strip() or ("twin" if sim else "so101")
    config = config if not Path(config).suffix else str(Path(config).expanduser().absolute())
    cameras = [a["agentview"], a["wrist"]]
    goals = (("joint_commands", "leader/joint_states"),) if teleop else ()
    nodes = []
    if sim:
        nodes.append(NodeSpec("so101_twin", "so101_twin", {
            "config": config, "task_id": _number(a["task_id"], "task_id", int, 0),
            "seed": _number(a["seed"], "seed", int, 0), "cameras": list(cameras)}, goals))
    else:
        nodes.append(NodeSpec("so101_arm", "so101_arm", {"config": config}, goals))
        nodes += [NodeSpec(f"{view}_camera", "camera", {"config": config, "camera": a[view]})
                  for view in ("agentview", "wrist")]
    if teleop:
        nodes.append(NodeSpec("so101_leader", "so101_leader", {"config": config}))
    if _truthy(a["perception"], "perception"):
        nodes.append(NodeSpec("fiducial_graphs", "fiducial_graphs", {"config": config, "cameras": list(cameras)}))
    main = nodes[0].name  # without recording the launch runs until stopped (Ctrl-C) or the arm faults
    record = a["record"].strip()
    if record:
        if not sim and not a["task"].strip():
            raise ValueError("argument task: recording from hardware needs the dataset's task string")
        nodes.append(NodeSpec("dataset_recorder", "dataset_recorder", {
            "config": config, "root": str(Path(record).expanduser().absolute()), "task": a["task"],
            "repo_id": a["repo_id"], "cameras": list(cameras),  # own lists: no YAML aliases
            "episodes": _number(a["episodes"], "episodes", int, 1),
            "episode_time_s": float(_number(a["episode_time_s"], "episode_time_s", float, 0.1)),
            "reset_time_s": float(_number(a["reset_time_s"], "reset_time_s", float, 0.0)),
            "auto_start": _truthy(a["auto_start"], "auto_start"),
            "reset_seed": nodes[0].parameters["seed"] + 1 if sim else -1}, goals))
        main = "dataset_recorder"
    return Plan("hardware", a, resolve_data_path(a["params_file"]), tuple(nodes), {"MUJOCO_GL": "egl"} if sim else {},
                main=main)


def _plan_data(eval_config: Path) -> dict:
    import yaml

    try:
        data = yaml.safe_load(eval_config.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"argument eval_config: cannot read {eval_config}: {e}") from None
    return data if isinstance(data, dict) else {}


def _plan_suite(eval_config: Path) -> str:
    """The suite type an eval YAML names (libero_spatial when it names none), read without loading the plan."""
    suite = _plan_data(eval_config).get("suite") or {}
    return str(suite.get("type", "libero_spatial")) if isinstance(suite, dict) else str(suite)


def _plan_output_dir(eval_config: Path, overrides: str, output_dir: str) -> Path:
    """The run folder the evaluator will write (the argument, else the overrides', else the plan's), absolute:
    what arm_policy writes the rollouts into too."""
    from sgvla.core.config import parse_line
    from sgvla.eval.config import EvalConfig

    out = output_dir.strip() or parse_line(overrides).get("output_dir") or _plan_data(eval_config).get(
        "output_dir") or EvalConfig.output_dir
    return Path(str(out)).expanduser().absolute()


ROLLOUTS = "rollouts"  # arm_policy's LeRobot dataset of the episodes' rollouts, in the run folder
OPERATOR_EPISODE_TIMEOUT_S = 12 * 3600.0  # an episode on the arm waits for its operator (a break, a long day)


def _so101_eval(a: dict[str, str]) -> Plan:
    """sim=true: sim_eval's graph on the twin's plan; sim=false: the arm (and cameras), arm_policy and the evaluator,
    the plan an so101_hardware one. The evaluator is the main node either way."""
    sim = _truthy(a["sim"], "sim")
    eval_config = a["eval_config"].strip() or f"config/eval/{'so101_twin' if sim else 'so101_hardware'}.yaml"
    suite = _plan_suite(resolve_data_path(eval_config))
    want = "so101_twin" if sim else "so101_hardware"
    if suite != want:
        raise ValueError(f"argument eval_config: {eval_config} is a {suite} plan; so101_eval sim={str(sim).lower()} "
                         f"runs {want} plans (sim=true: the twin, sim=false: the arm)")
    params = a["params_file"].strip() or f"config/ros/{'sim_eval' if sim else 'so101_eval'}.yaml"
    if sim:
        if _truthy(a["perception"], "perception"):
            raise ValueError("argument perception: so101_eval sim=true takes perception from its plan (the twin "
                             "suite's perception: true with graph_source: fiducial, e.g. "
                             "config/eval/so101_twin_fiducial.yaml); perception=true starts fiducial_graphs for the "
                             "arm (sim=false)")
        twin = _sim_eval({"eval_config": eval_config, "eval_overrides": a["eval_overrides"],
                          "output_dir": a["output_dir"], "params_file": params, "stepping": "lockstep",
                          "render_images": a["render_images"], "record": a["record"]})
        return Plan("so101_eval", a, twin.params_file, twin.nodes, twin.env, twin.main)
    config = a["config"].strip() or "so101"
    config = config if not Path(config).suffix else str(Path(config).expanduser().absolute())
    nodes = [NodeSpec("so101_arm", "so101_arm", {"config": config})]
    if _truthy(a["cameras"], "cameras"):
        nodes += [NodeSpec(f"{view}_camera", "camera", {"config": config, "camera": a[view]})
                  for view in ("agentview", "wrist")]
    if _truthy(a["perception"], "perception"):
        nodes.append(NodeSpec("fiducial_graphs", "fiducial_graphs", {
            "config": config, "cameras": [a["agentview"], a["wrist"]]}))
    out = _plan_output_dir(resolve_data_path(eval_config), a["eval_overrides"], a["output_dir"])
    cameras = [a["agentview"], a["wrist"]] if _truthy(a["cameras"], "cameras") else [""]  # [""]: none
    nodes.append(NodeSpec("arm_policy", "arm_policy", {"config": config, "cameras": cameras,
                                                       "rollouts": str(out / ROLLOUTS)}))
    record = a["record"].strip()
    if record:
        nodes.append(NodeSpec("bag_recorder", "bag_recorder", {"output": str(Path(record).expanduser().absolute())}))
    nodes.append(NodeSpec("evaluator", "evaluator", {
        "config": str(resolve_data_path(eval_config)), "overrides": a["eval_overrides"], "output_dir": str(out),
        "wait_for_nodes": [n.name for n in nodes],
        "wait_for_subscribers": subscriber_counts(tuple(nodes), ("joint_commands", "joint_states"),
                                                  SO101_EVAL_TOPICS),
        "episode_timeout_s": OPERATOR_EPISODE_TIMEOUT_S}))
    return Plan("so101_eval", a, resolve_data_path(params), tuple(nodes), {}, main="evaluator")
