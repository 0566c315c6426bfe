"""Simulated regression: the graph-injected evaluation over topics (sim_bridge, scene_graph, vla_policy,
evaluator; bag_recorder with record:=FOLDER).

    ros2 launch sgvla_ros sim_eval.launch.py eval_config:=config/eval/default.yaml eval_overrides:="tasks=[0]"

Nodes, parameters and remappings come from `sgvla.launch.plan` (the description `sgvla launch sim_eval`
runs), resolved with this launch's arguments (`sgvla_ros.launch_description`); the launch ends when the
evaluator exits.
"""

from sgvla_ros.launch_description import describe


def generate_launch_description():
    return describe("sim_eval")
