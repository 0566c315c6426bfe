"""Replay scene graphs from a JSONL file and record what arrives: a smoke test of the node graph.

    ros2 launch sgvla_ros graph_replay.launch.py input:=graphs.jsonl output:=received.jsonl
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("input", description="JSONL file of graph records to publish"),
        DeclareLaunchArgument("output", default_value="scene_graphs.jsonl"),
        DeclareLaunchArgument("topic", default_value="scene_graph"),
        Node(package="sgvla_ros", executable="graph_recorder", name="graph_recorder",
             parameters=[{"output": LaunchConfiguration("output"), "topic": LaunchConfiguration("topic")}]),
        Node(package="sgvla_ros", executable="graph_publisher", name="graph_publisher",
             parameters=[{"input": LaunchConfiguration("input"), "topic": LaunchConfiguration("topic"),
                          "wait_for_subscribers": 1}]),
    ])
