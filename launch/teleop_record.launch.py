"""Teleoperated recording of SO101 episodes into a LeRobot dataset (the node owns arms and cameras).

    ros2 launch sgvla_ros teleop_record.launch.py root:=$HOME/data/so101_bowls \
        task:="put the bowl on the stove" episodes:=10
    ros2 topic pub --once /record_control std_msgs/String "data: start"     # start | save | rerecord | abort | quit

Same loop and dataset layout as ``sgvla record`` (which takes single key presses in its terminal;
ros2 launch gives nodes no keyboard, hence record_control, or auto_start:=true with episode_time_s
and reset_time_s). ``sim:=true`` is reserved for the SO101 MuJoCo twin.

The recording arguments (root, task, repo_id, episodes, episode_time_s, reset_time_s, auto_start: names, defaults,
descriptions, types) are `sgvla.so101.recording.RecordingSettings`, as `sgvla record`'s flags and the node's
parameters are.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import UnlessCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from sgvla.core.settings import specs
from sgvla.so101.recording import RecordingSettings


def generate_launch_description():
    arg = LaunchConfiguration
    recording = specs(RecordingSettings)
    return LaunchDescription([
        DeclareLaunchArgument("config", default_value="so101", description="rig config name or YAML path"),
        # root and task have no default: ros2 launch asks for them
        *(DeclareLaunchArgument(s.name, description=s.help) if s.name in ("root", "task") else
          DeclareLaunchArgument(s.name, default_value=s.text, description=s.help) for s in recording),
        DeclareLaunchArgument("sim", default_value="false", description="SO101 MuJoCo twin instead of hardware"),
        Node(package="sgvla_ros", executable="teleop_recorder", name="teleop_recorder", output="screen",
             condition=UnlessCondition(arg("sim")),
             parameters=[{"config": arg("config"),
                          **{s.name: ParameterValue(arg(s.name), value_type=s.kind) for s in recording}}]),
    ])
