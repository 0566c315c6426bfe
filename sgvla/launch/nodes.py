"""The one table of sgvla's ROS 2 executables and QoS profiles.

``ros2_ws/src/sgvla_ros/setup.py`` generates the console scripts from ``EXECUTABLES`` (it runs this file by
path: plain data, no imports), launch plans name executables from it, and ``sgvla_ros.qos`` builds rclpy's
profiles from ``QOS``, whose descriptions the README's topic tables quote.
"""

from __future__ import annotations

from dataclasses import dataclass

PACKAGE = "sgvla_ros"

# `ros2 run sgvla_ros <executable>` -> the module of sgvla_ros (the nodes/ folder) whose main() runs it.
EXECUTABLES = {
    "sim_bridge": "sim_bridge",
    "scene_graph": "scene_graph_node",
    "vla_policy": "vla_policy",
    "evaluator": "evaluator",
    "bag_recorder": "bag_recorder",
    "vlm_query": "vlm_query",
    "graph_publisher": "graph_publisher",
    "graph_recorder": "graph_recorder",
    "so101_arm": "so101_arm",
    "so101_leader": "so101_leader",
    "keyboard_teleop": "keyboard_teleop",
    "camera": "camera",
    "teleop_recorder": "teleop_recorder",
    "so101_twin": "so101_twin",
    "dataset_recorder": "dataset_recorder",
    "arm_policy": "arm_policy",
    "so101_policy": "so101_policy",
    "fiducial_graphs": "fiducial_graphs",
}


@dataclass(frozen=True)
class Qos:
    depth: int
    reliable: bool
    latched: bool  # transient local: late joiners get the last `depth` messages
    why: str


QOS = {
    "control": Qos(10, True, True, "lock-step needs every message; a late joiner (or a recorder) still gets the "
                                   "latest"),
    "latched": Qos(1, True, True, "the current value for late joiners"),
    "reliable": Qos(10, True, False, "scene graphs, prompts, results: small, and none may be lost"),
    "frames": Qos(2, True, True, "lock-step needs every frame, also when the policy subscribes just before the "
                                 "reset; sensor-data (best effort) subscribers still match"),
    "sensor": Qos(5, False, False, "camera images and joint states: latest wins"),
    "clock": Qos(1, False, False, "what rclpy's time source subscribes with"),
    "commands": Qos(1, True, False, "the newest arm goal arrives, stale ones never queue"),
}


def describe_qos(name: str) -> str:
    q = QOS[name]
    return (f"{'reliable' if q.reliable else 'best effort'}, {'transient local' if q.latched else 'volatile'}, "
            f"keep last {q.depth}: {q.why}")


def console_scripts() -> list[str]:
    """setup.py's entry points."""
    return [f"{name} = {PACKAGE}.{module}:main" for name, module in EXECUTABLES.items()]
