"""The SO101 on the desk as ROS topics: follower arm, leader arm, the rig's cameras; or its MuJoCo twin.

    ros2 launch sgvla_ros hardware.launch.py                        # arm + cameras; commands on joint_commands
    ros2 launch sgvla_ros hardware.launch.py teleop:=leader         # + the leader arm driving the follower
    ros2 launch sgvla_ros hardware.launch.py sim:=true teleop:=leader record:=/data/twin episodes:=5 auto_start:=true
    ros2 launch sgvla_ros hardware.launch.py config:=/path/rig.yaml

``sim:=true`` runs the SO101 MuJoCo twin (so101_twin) instead of the arm and the cameras, on the same topics
(config twin: config/hardware/twin.yaml). ``record:=DIR`` adds dataset_recorder, and the launch ends when it
has recorded ``episodes``. Ports, calibration ids, cameras and safety limits come from the rig config.

Nodes, parameters and remappings come from `sgvla.launch_plan` (the description `sgvla launch hardware`
runs), resolved with this launch's arguments. The loopback-only DDS environment of local runs is applied
unless loopback:=false (the domain id stays the caller's).
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

LAUNCH = "hardware"
PACKAGE = "sgvla_ros"


def _kwargs(spec, plan):
    return dict(package=PACKAGE, name=spec.name, output="screen", remappings=list(spec.remappings),
                parameters=[str(plan.params_file), spec.parameters], additional_env=plan.env)


def _nodes(context):
    plan = launch_plan(LAUNCH, {a.name: LaunchConfiguration(a.name).perform(context) for a in ARGUMENTS[LAUNCH]})
    make = {
        "so101_arm": lambda s: Node(executable="so101_arm", **_kwargs(s, plan)),
        "so101_leader": lambda s: Node(executable="so101_leader", **_kwargs(s, plan)),
        "camera": lambda s: Node(executable="camera", **_kwargs(s, plan)),
        "so101_twin": lambda s: Node(executable="so101_twin", **_kwargs(s, plan)),
        "dataset_recorder": lambda s: Node(executable="dataset_recorder", **_kwargs(s, plan)),
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
