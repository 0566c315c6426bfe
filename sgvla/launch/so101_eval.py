"""`so101_eval`: an evaluation on the SO101. sim=true: sim_eval's graph on a twin plan (unattended); sim=false: the
arm (and the rig's cameras), arm_policy and the evaluator, the plan an so101_hardware one, the operator's protocol.
The evaluator is the main node either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sgvla.launch.hardware import RIG_CAMERA_NOTE, rig_config
from sgvla.launch.registry import Argument, NodeSpec, Plan, register_launch, registered
from sgvla.launch.sim_eval import plan_data, plan_suite
from sgvla.launch.topics import SO101_EVAL_NODE_ROLES, SO101_EVAL_TOPICS, subscriber_counts
from sgvla.paths import resolve_data_path
from sgvla.so101.cameras import AGENTVIEW, CAMERAS, WRIST

ROLLOUTS = "rollouts"  # arm_policy's LeRobot dataset of the episodes' rollouts, in the run folder
OPERATOR_EPISODE_TIMEOUT_S = 12 * 3600.0  # an episode on the arm waits for its operator (a break, a long day)

ARGUMENTS = (
    Argument("sim", "false", "true: the SO101 twin unattended (sim_eval's nodes: sim_bridge, scene_graph, "
                             "vla_policy, evaluator); false: the arm, the rig's cameras and the operator's protocol",
             bool),
    Argument("eval_config", "", "evaluation plan (the files of `sgvla eval`); empty: "
                                "config/eval/so101_twin.yaml with sim, config/eval/so101_hardware.yaml without"),
    Argument("eval_overrides", "", "key=value overrides of the plan, space-separated, e.g. 'tasks=[0] episodes=1'"),
    Argument("output_dir", "", "run directory (default: the plan's output_dir); on the arm its rollouts/ is the "
                               "LeRobot dataset of the episodes' rollouts"),
    Argument("config", "so101", "hardware: rig config name (config/hardware/) or YAML path"),
    Argument("cameras", "true", f"hardware: start the rig's {' and '.join(CAMERAS)} camera nodes (recorded in the "
                                "rollouts)", bool),
    Argument(AGENTVIEW, AGENTVIEW, "hardware: rig camera name of the agent view"),
    Argument(WRIST, WRIST, "hardware: rig camera name of the wrist view"),
    Argument("record", "", "rosbag2 folder (MCAP) to record every topic into; empty: no recording"),
    Argument("render_images", "auto", "sim: true | false | auto (true when recording): camera images on topics",
             choices=("true", "false", "auto")),
    Argument("perception", "false", "hardware: fiducial_graphs (object poses and graphs from the cameras' "
                                    "markers): what graph modes and the prompt-grounded policy read on the arm "
                                    "(sim=true: the plan's suite.perception and graph_source=fiducial)", bool),
    Argument("params_file", "", "ROS 2 parameter file of the nodes; empty: config/ros/sim_eval.yaml with sim, "
                                "config/ros/so101_eval.yaml without"),
)


def plan_output_dir(eval_config: Path, overrides: str, output_dir: str) -> Path:
    """The run folder the evaluator will write (the argument, else the overrides', else the plan's), absolute:
    what arm_policy writes the rollouts into too."""
    from sgvla.core.config import parse_line
    from sgvla.eval.config import EvalConfig

    out = output_dir.strip() or parse_line(overrides).get("output_dir") or plan_data(eval_config).get(
        "output_dir") or EvalConfig.output_dir
    return Path(str(out)).expanduser().absolute()


@register_launch("so101_eval", ARGUMENTS, topics=SO101_EVAL_TOPICS, roles=SO101_EVAL_NODE_ROLES,
                 cameras=lambda: CAMERAS, camera_note=RIG_CAMERA_NOTE)
def so101_eval(a: dict[str, Any]) -> Plan:
    sim = a["sim"]
    eval_config = a["eval_config"].strip() or f"config/eval/{'so101_twin' if sim else 'so101_hardware'}.yaml"
    suite = plan_suite(resolve_data_path(eval_config))
    want = "so101_twin" if sim else "so101_hardware"
    if suite != want:
        raise ValueError(f"argument eval_config: {eval_config} is a {suite} plan; so101_eval sim={str(sim).lower()} "
                         f"runs {want} plans (sim=true: the twin, sim=false: the arm)")
    params = a["params_file"].strip() or f"config/ros/{'sim_eval' if sim else 'so101_eval'}.yaml"
    if sim:
        if a["perception"]:
            raise ValueError("argument perception: so101_eval sim=true takes perception from its plan (the twin "
                             "suite's perception: true with graph_source: fiducial, e.g. "
                             "config/eval/so101_twin_fiducial.yaml); perception=true starts fiducial_graphs for the "
                             "arm (sim=false)")
        return registered("sim_eval").plan({
            "eval_config": eval_config, "eval_overrides": a["eval_overrides"], "output_dir": a["output_dir"],
            "params_file": params, "stepping": "lockstep", "render_images": a["render_images"], "record": a["record"]})
    config = rig_config(a["config"], "so101")
    cameras = [a[view] for view in CAMERAS]
    nodes = [NodeSpec("so101_arm", "so101_arm", {"config": config})]
    if a["cameras"]:
        nodes += [NodeSpec(f"{view}_camera", "camera", {"config": config, "camera": a[view]}) for view in CAMERAS]
    if a["perception"]:
        nodes.append(NodeSpec("fiducial_graphs", "fiducial_graphs", {"config": config, "cameras": list(cameras)}))
    out = plan_output_dir(resolve_data_path(eval_config), a["eval_overrides"], a["output_dir"])
    nodes.append(NodeSpec("arm_policy", "arm_policy", {"config": config,
                                                       "cameras": list(cameras) if a["cameras"] else [""],  # none
                                                       "rollouts": str(out / ROLLOUTS)}))
    record = a["record"].strip()
    if record:
        nodes.append(NodeSpec("bag_recorder", "bag_recorder", {"output": str(Path(record).expanduser().absolute())}))
    nodes.append(NodeSpec("evaluator", "evaluator", {
        "config": str(resolve_data_path(eval_config)), "overrides": a["eval_overrides"], "output_dir": str(out),
        "wait_for_nodes": [n.name for n in nodes],
        "wait_for_subscribers": subscriber_counts(nodes, ("joint_commands", "joint_states"), SO101_EVAL_TOPICS),
        "episode_timeout_s": OPERATOR_EPISODE_TIMEOUT_S}))
    return Plan("so101_eval", {}, resolve_data_path(params), tuple(nodes), {}, main="evaluator")
