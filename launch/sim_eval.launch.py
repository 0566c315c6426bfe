"""Simulated regression: the graph-injected evaluation over topics (sim_bridge, scene_graph, vla_policy,
evaluator; bag_recorder with record:=FOLDER).

    ros2 launch sgvla_ros sim_eval.launch.py eval_config:=config/eval/default.yaml eval_overrides:="tasks=[0]"

Nodes, parameters and remappings come from `sgvla.launch_plan` (the description `sgvla launch sim_eval`
runs), resolved with this launch's arguments; the launch ends when the evaluator exits. The loopback-only
DDS environment of local runs is applied unless loopback:=false (the domain id stays the caller's).
"""

from launch import LaunchDescription
from launch.actions import (
    DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler, SetEnvironmentVariable,
)
from launch.conditions import IfCondition
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from sgvla.launch_plan import ARGUMENTS, launch_plan
from sgvla.ros_env import loopback_env

LAUNCH = "sim_eval"
PACKAGE = "sgvla_ros"


def _kwargs(spec, plan):
    return dict(package=PACKAGE, name=spec.name, output="screen", remappings=list(spec.remappings),
                parameters=[str(plan.params_file), spec.parameters], additional_env=plan.env)


def _nodes(context):
    plan = launch_plan(LAUNCH, {a.name: LaunchConfiguration(a.name).perform(context) for a in ARGUMENTS[LAUNCH]})
    make = {
        "sim_bridge": lambda s: Node(executable="sim_bridge", **_kwargs(s, plan)),
        "scene_graph": lambda s: Node(executable="scene_graph", **_kwargs(s, plan)),
        "vla_policy": lambda s: Node(executable="vla_policy", **_kwargs(s, plan)),
        "bag_recorder": lambda s: Node(executable="bag_recorder", **_kwargs(s, plan)),
        "evaluator": lambda s: Node(executable="evaluator", **_kwargs(s, plan)),
    }
    actions = {spec.name: make[spec.executable](spec) for spec in plan.nodes}
    ends = RegisterEventHandler(OnProcessExit(target_action=actions[plan.main],
                                              on_exit=[EmitEvent(event=Shutdown(reason=f"{plan.main} finished"))]))
    return [*actions.values(), ends]


def generate_launch_description():
    loopback = {k: v for k, v in loopback_env(0, base={}).items() if k != "ROS_DOMAIN_ID"}
    return LaunchDescription([
        *(DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
          for a in ARGUMENTS[LAUNCH]),
        DeclareLaunchArgument("loopback", default_value="true",
                              description="loopback-only DDS (config/fastdds_localhost.xml)"),
        *(SetEnvironmentVariable(k, v, condition=IfCondition(LaunchConfiguration("loopback")))
          for k, v in loopback.items()),
        OpaqueFunction(function=_nodes),
    ])
