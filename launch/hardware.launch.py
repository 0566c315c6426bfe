"""The SO101 on the desk as ROS topics: follower arm, leader arm, and the rig's cameras.

    ros2 launch sgvla_ros hardware.launch.py                        # arm + cameras; commands on joint_commands
    ros2 launch sgvla_ros hardware.launch.py teleop:=true           # + leader arm driving the follower
    ros2 launch sgvla_ros hardware.launch.py config:=/path/rig.yaml

Ports, calibration ids, cameras and safety limits come from the rig config (config/hardware/so101.yaml).
``sim:=true`` is reserved for the SO101 MuJoCo twin and starts nothing of the hardware yet.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, GroupAction
from launch.conditions import IfCondition, UnlessCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    config, teleop, sim = LaunchConfiguration("config"), LaunchConfiguration("teleop"), LaunchConfiguration("sim")
    real = UnlessCondition(sim)
    return LaunchDescription([
        DeclareLaunchArgument("config", default_value="so101", description="rig config name or YAML path"),
        DeclareLaunchArgument("teleop", default_value="false", description="the leader arm drives the follower"),
        DeclareLaunchArgument("sim", default_value="false", description="SO101 MuJoCo twin instead of hardware"),
        DeclareLaunchArgument("agentview", default_value="agentview", description="rig camera name of the agent view"),
        DeclareLaunchArgument("wrist", default_value="wrist", description="rig camera name of the wrist view"),
        GroupAction(condition=real, actions=[
            Node(package="sgvla_ros", executable="so101_arm", name="so101_arm", parameters=[{"config": config}],
                 condition=UnlessCondition(teleop)),
            Node(package="sgvla_ros", executable="so101_arm", name="so101_arm", parameters=[{"config": config}],
                 remappings=[("joint_commands", "leader/joint_states")], condition=IfCondition(teleop)),
            Node(package="sgvla_ros", executable="so101_leader", name="so101_leader", parameters=[{"config": config}],
                 condition=IfCondition(teleop)),
            Node(package="sgvla_ros", executable="camera", name="agentview_camera",
                 parameters=[{"config": config, "camera": LaunchConfiguration("agentview")}]),
            Node(package="sgvla_ros", executable="camera", name="wrist_camera",
                 parameters=[{"config": config, "camera": LaunchConfiguration("wrist")}]),
        ]),
    ])
