"""`sim_eval`: the evaluation of `sgvla eval` over topics on a simulated suite (LIBERO, the SO101 twin):
sim_bridge, scene_graph, vla_policy and the evaluator (bag_recorder with record=FOLDER).

The plan's suite says what the nodes see: its cameras (topics made at start; a learned policy reads them all), the
ontology its objects are named in, and the modules its nodes import at start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sgvla.plugins  # noqa: F401  (the registered suites: a plan's suite sets its nodes' cameras and ontology)
from sgvla.core.config import ConfigError, parse_line
from sgvla.eval.config import default_suite
from sgvla.eval.suite import SuiteConfig
from sgvla.launch.registry import Argument, NodeSpec, Plan, register_launch
from sgvla.launch.topics import NODE_ROLES, TOPICS, subscriber_counts
from sgvla.paths import resolve_data_path

DEFAULT_PLAN = "config/eval/default.yaml"
ARGUMENTS = (
    Argument("eval_config", DEFAULT_PLAN, "evaluation plan (the same files as `sgvla eval`)"),
    Argument("eval_overrides", "", "key=value overrides of the plan, space-separated, e.g. 'tasks=[0] episodes=1'"),
    Argument("output_dir", "", "run directory (default: the plan's output_dir)"),
    Argument("params_file", "config/ros/sim_eval.yaml", "ROS 2 parameter file of the nodes"),
    Argument("stepping", "lockstep", "lockstep (advance on the action of the current step) | free_running",
             choices=("lockstep", "free_running")),
    Argument("render_images", "auto", "true | false | auto (true when recording): camera images and overlays",
             choices=("true", "false", "auto")),
    Argument("record", "", "rosbag2 folder (MCAP) to record every topic into; empty: no recording"),
)


def plan_data(eval_config: Path) -> dict:
    import yaml

    try:
        data = yaml.safe_load(eval_config.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"argument eval_config: cannot read {eval_config}: {e}") from None
    return data if isinstance(data, dict) else {}


def plan_suite(eval_config: Path) -> str:
    """The suite type an eval YAML names (libero_spatial when it names none), read without loading the plan."""
    suite = plan_data(eval_config).get("suite") or {}
    default = default_suite().type
    return str(suite.get("type", default)) if isinstance(suite, dict) else str(suite or default)


def suite_cameras(eval_config: str = DEFAULT_PLAN) -> tuple[str, ...]:
    """The cameras the suite of an evaluation plan renders (the default plan's: the topic table's example)."""
    return SuiteConfig.choice(plan_suite(resolve_data_path(eval_config))).rendered()


@register_launch("sim_eval", ARGUMENTS, topics=TOPICS, roles=NODE_ROLES, cameras=suite_cameras, every_qos=True,
                 camera_note="- `{{camera}}`: each camera the episode observes, e.g. {cameras}. Every name is relative "
                             "(a launch namespace applies) except `/clock`; bag_recorder subscribes to all topics.")
def sim_eval(a: dict[str, Any]) -> Plan:
    try:  # its syntax is refused here, before any node starts
        parse_line(a["eval_overrides"])
    except ConfigError as e:
        raise ValueError(f"argument eval_overrides: {e}") from None
    lockstep = a["stepping"] == "lockstep"
    record = a["record"].strip()
    render = bool(record) if a["render_images"] == "auto" else a["render_images"] == "true"
    suite = SuiteConfig.choice(plan_suite(resolve_data_path(a["eval_config"])))
    cameras = suite.rendered()  # each node gets a list of its own: no YAML aliases in the parameter file
    nodes = [
        NodeSpec("sim_bridge", "sim_bridge", {"lockstep": lockstep, "render_images": render,
                                              "cameras": list(cameras), "preload": list(suite.backend_modules) or [""]}),
        NodeSpec("scene_graph", "scene_graph", {"overlay": render, "ontology": suite.ontology,
                                                "cameras": list(cameras)}),
        NodeSpec("vla_policy", "vla_policy", {"lockstep": lockstep, "cameras": list(cameras),
                                              "preload": list(suite.policy_modules) or [""]}),
    ]
    if record:
        nodes.append(NodeSpec("bag_recorder", "bag_recorder", {"output": str(Path(record).expanduser().absolute())}))
    waits = subscriber_counts(nodes, ("sim/status", "sim/scene", "action"))
    nodes.append(NodeSpec("evaluator", "evaluator", {
        "config": str(resolve_data_path(a["eval_config"])), "overrides": a["eval_overrides"],
        "output_dir": str(Path(a["output_dir"]).expanduser().absolute()) if a["output_dir"] else "",
        "wait_for_nodes": [n.name for n in nodes], "wait_for_subscribers": waits}))
    return Plan("sim_eval", {}, resolve_data_path(a["params_file"]), tuple(nodes), {"MUJOCO_GL": "egl"},
                main="evaluator")
