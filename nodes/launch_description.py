"""The launch_ros side of `sgvla.launch.plan`: `launch/<name>.launch.py` is `describe("<name>")`.

The plan (nodes, parameters, remappings, environment, main node) is resolved from the launch arguments at
launch time; the launch ends when the plan's main node exits. The loopback-only DDS environment of local
runs is applied unless loopback:=false (the domain id stays the caller's).
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

from sgvla.launch.nodes import PACKAGE
from sgvla.launch.plan import ARGUMENTS, launch_plan
from sgvla.core.ros_env import loopback_env


def _nodes(name: str, context) -> list:
    plan = launch_plan(name, {a.name: LaunchConfiguration(a.name).perform(context) for a in ARGUMENTS[name]})
    actions = {spec.name: Node(package=PACKAGE, executable=spec.executable, name=spec.name, output="screen",
                               remappings=list(spec.remappings), parameters=[str(plan.params_file), spec.parameters],
                               additional_env=plan.env)
               for spec in plan.nodes}
    ends = RegisterEventHandler(OnProcessExit(target_action=actions[plan.main],
                                              on_exit=[EmitEvent(event=Shutdown(reason=f"{plan.main} finished"))]))
    return [*actions.values(), ends]


def describe(name: str) -> LaunchDescription:
    loopback = {k: v for k, v in loopback_env(0, base={}).items() if k != "ROS_DOMAIN_ID"}
    return LaunchDescription([
        *(DeclareLaunchArgument(a.name, default_value=a.default, description=a.description) for a in ARGUMENTS[name]),
        DeclareLaunchArgument("loopback", default_value="true",
                              description="loopback-only DDS (config/fastdds_localhost.xml)"),
        *(SetEnvironmentVariable(k, v, condition=IfCondition(LaunchConfiguration("loopback")))
          for k, v in loopback.items()),
        OpaqueFunction(function=lambda context: _nodes(name, context)),
    ])
