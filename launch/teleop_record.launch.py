"""Teleoperated recording of SO101 episodes into a LeRobot dataset (the node owns arms and cameras).

    ros2 launch sgvla_ros teleop_record.launch.py root:=$HOME/data/so101_bowls \
        task:="put the bowl on the stove" episodes:=10
    ros2 topic pub --once /record_control std_msgs/String "data: start"     # start | save | rerecord | abort | quit

Same loop and dataset layout as ``sgvla record`` (which takes single key presses in its terminal;
ros2 launch gives nodes no keyboard, hence record_control, or auto_start:=true with episode_time_s
and reset_time_s). ``sim:=true`` is reserved for the SO101 MuJoCo twin.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import UnlessCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description():
    arg = LaunchConfiguration
    return LaunchDescription([
        DeclareLaunchArgument("config", default_value="so101", description="rig config name or YAML path"),
        DeclareLaunchArgument("root", description="dataset folder (created, or appended to)"),
        DeclareLaunchArgument("task", description="task string of every episode"),
        DeclareLaunchArgument("repo_id", default_value="local/so101_bowls"),
        DeclareLaunchArgument("episodes", default_value="1"),
        DeclareLaunchArgument("episode_time_s", default_value="60.0"),
        DeclareLaunchArgument("reset_time_s", default_value="10.0"),
        DeclareLaunchArgument("auto_start", default_value="false"),
        DeclareLaunchArgument("sim", default_value="false", description="SO101 MuJoCo twin instead of hardware"),
        Node(package="sgvla_ros", executable="teleop_recorder", name="teleop_recorder", output="screen",
             condition=UnlessCondition(arg("sim")),
             parameters=[{"config": arg("config"), "root": arg("root"), "task": arg("task"),
                          "repo_id": arg("repo_id"), "episodes": ParameterValue(arg("episodes"), value_type=int),
                          "episode_time_s": ParameterValue(arg("episode_time_s"), value_type=float),
                          "reset_time_s": ParameterValue(arg("reset_time_s"), value_type=float),
                          "auto_start": ParameterValue(arg("auto_start"), value_type=bool)}]),
    ])
