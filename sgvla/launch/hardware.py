"""`hardware`: the SO101 rig as ROS topics (follower arm, the rig's cameras, optionally the leader arm and
fiducial perception), or its MuJoCo twin speaking the same topics (sim=true); record=FOLDER adds dataset_recorder,
whose settings are the recording session's (`sgvla.so101.recording`, the same as `sgvla record`'s flags)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sgvla.core.settings import specs
from sgvla.launch.registry import Argument, NodeSpec, Plan, register_launch
from sgvla.launch.topics import HARDWARE_NODE_ROLES, HARDWARE_TOPICS
from sgvla.paths import resolve_data_path
from sgvla.so101.cameras import AGENTVIEW, CAMERAS, WRIST
from sgvla.so101.recording import RecordingSettings

# The recorder's settings but its dataset folder, which is the launch's `record` (empty: no recorder).
RECORDING = tuple(s for s in specs(RecordingSettings) if s.name != "root")
# The leader port that makes so101_leader serve a simulated leader (a Feetech bus of its own whose joints swing by
# themselves, as `sgvla record --sim-leader` and `sgvla sim-bus` serve) instead of opening a serial port.
SIM_LEADER_PORT = "sim_leader"
RIG_CAMERA_NOTE = ("- `{{camera}}`: each rig camera by its name in the rig config (arguments {cameras}). Every name "
                   "is relative (a launch namespace applies).")


def rig_config(text: str, default: str) -> str:
    """A rig config argument: a name in config/hardware/, or a YAML path (made absolute for the nodes)."""
    config = text.strip() or default
    return config if not Path(config).suffix else str(Path(config).expanduser().absolute())


ARGUMENTS = (
    Argument("config", "", "rig config name (config/hardware/) or YAML path; empty: so101, or twin with sim"),
    Argument("sim", "false", "true: the SO101 MuJoCo twin (so101_twin) instead of the follower arm and cameras",
             bool),
    Argument("teleop", "false", "false: the follower follows joint_commands | leader (or true): the leader arm "
                                "drives it (joint_commands remapped to leader/joint_states) | sim_leader: a "
                                "simulated leader that moves by itself drives it (no arm needed)",
             choices=("false", "leader", "true", SIM_LEADER_PORT)),
    Argument(AGENTVIEW, AGENTVIEW, "rig camera name of the agent view"),
    Argument(WRIST, WRIST, "rig camera name of the wrist view"),
    Argument("task_id", "0", "sim: the twin's task (config/twin/so101_tabletop.yaml)", int, minimum=0),
    Argument("seed", "0", "sim: seed of the twin's scene reset", int, minimum=0),
    Argument("record", "", "LeRobot dataset folder to record into (dataset_recorder); empty: no recording"),
    *(Argument.of(s) for s in RECORDING),
    Argument("perception", "false", "true: fiducial_graphs: object poses and graphs (source=fiducial) from the "
                                    "cameras' fiducial markers", bool),
    Argument("params_file", "config/ros/hardware.yaml", "ROS 2 parameter file of the nodes"),
)


@register_launch("hardware", ARGUMENTS, topics=HARDWARE_TOPICS, roles=HARDWARE_NODE_ROLES, cameras=lambda: CAMERAS,
                 camera_note=RIG_CAMERA_NOTE)
def hardware(a: dict[str, Any]) -> Plan:
    sim = a["sim"]
    teleop = a["teleop"] != "false"
    config = rig_config(a["config"], "twin" if sim else "so101")
    cameras = [a[view] for view in CAMERAS]
    goals = (("joint_commands", "leader/joint_states"),) if teleop else ()
    nodes = []
    if sim:
        nodes.append(NodeSpec("so101_twin", "so101_twin", {
            "config": config, "task_id": a["task_id"], "seed": a["seed"], "cameras": list(cameras)}, goals))
    else:
        nodes.append(NodeSpec("so101_arm", "so101_arm", {"config": config}, goals))
        nodes += [NodeSpec(f"{view}_camera", "camera", {"config": config, "camera": a[view]}) for view in CAMERAS]
    if teleop:
        leader = {"port": SIM_LEADER_PORT} if a["teleop"] == SIM_LEADER_PORT else {}
        nodes.append(NodeSpec("so101_leader", "so101_leader", {"config": config, **leader}))
    if a["perception"]:
        nodes.append(NodeSpec("fiducial_graphs", "fiducial_graphs", {"config": config, "cameras": list(cameras)}))
    main = nodes[0].name  # without recording the launch runs until stopped (Ctrl-C) or the arm faults
    record = a["record"].strip()
    if record:
        if not sim and not a["task"].strip():
            raise ValueError("argument task: recording from hardware needs the dataset's task string")
        nodes.append(NodeSpec("dataset_recorder", "dataset_recorder", {
            "config": config, "root": str(Path(record).expanduser().absolute()),
            **{s.name: a[s.name] for s in RECORDING},
            "cameras": list(cameras),  # own lists: no YAML aliases
            "reset_seed": a["seed"] + 1 if sim else -1}, goals))
        main = "dataset_recorder"
    return Plan("hardware", {}, resolve_data_path(a["params_file"]), tuple(nodes), {"MUJOCO_GL": "egl"} if sim else {},
                main=main)
