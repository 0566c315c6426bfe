"""ament_python package installing the sgvla nodes (nodes/), launch files, config and URDF.

The package directories are symlinks to the repository's top-level folders, so the nodes,
launch files and config that `colcon build` installs are the same files `sgvla launch` runs.
"""

from glob import glob

from setuptools import setup

PACKAGE = "sgvla_ros"

# Node executables: `ros2 run sgvla_ros <name>`. The launch files and `sgvla launch` name these.
NODES = {
    "graph_publisher": "sgvla_ros.graph_publisher:main",
    "graph_recorder": "sgvla_ros.graph_recorder:main",
    "vlm_query": "sgvla_ros.vlm_query:main",
    "so101_arm": "sgvla_ros.so101_arm:main",
    "so101_leader": "sgvla_ros.so101_leader:main",
    "keyboard_teleop": "sgvla_ros.keyboard_teleop:main",
    "camera": "sgvla_ros.camera:main",
    "teleop_recorder": "sgvla_ros.teleop_recorder:main",
    "so101_twin": "sgvla_ros.so101_twin:main",
    "dataset_recorder": "sgvla_ros.dataset_recorder:main",
    "sim_bridge": "sgvla_ros.sim_bridge:main",
    "scene_graph": "sgvla_ros.scene_graph_node:main",
    "vla_policy": "sgvla_ros.vla_policy:main",
    "evaluator": "sgvla_ros.evaluator:main",
    "bag_recorder": "sgvla_ros.bag_recorder:main",
}


def data(folder: str, pattern: str) -> tuple[str, list[str]]:
    return (f"share/{PACKAGE}/{folder}", sorted(glob(f"{folder}/{pattern}", recursive=True)))


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=[PACKAGE],
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        data("launch", "*.launch.py"),
        data("config", "*.yaml"),
        data("config", "*.xml"),
        data("urdf", "*.urdf"),
        data("urdf/meshes", "*.stl"),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    description="ROS 2 nodes of sgvla",
    license="Apache-2.0",
    entry_points={"console_scripts": [f"{name} = {target}" for name, target in NODES.items()]},
)
