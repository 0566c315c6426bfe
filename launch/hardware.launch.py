"""The SO101 on the desk as ROS topics: follower arm, leader arm, the rig's cameras; or its MuJoCo twin.

    ros2 launch sgvla_ros hardware.launch.py                        # arm + cameras; commands on joint_commands
    ros2 launch sgvla_ros hardware.launch.py teleop:=leader         # + the leader arm driving the follower
    ros2 launch sgvla_ros hardware.launch.py sim:=true teleop:=leader record:=/data/twin episodes:=5 auto_start:=true
    ros2 launch sgvla_ros hardware.launch.py config:=/path/rig.yaml

``sim:=true`` runs the SO101 MuJoCo twin (so101_twin) instead of the arm and the cameras, on the same topics
(config twin: config/hardware/twin.yaml). ``record:=DIR`` adds dataset_recorder, and the launch ends when it
has recorded ``episodes``. Ports, calibration ids, cameras and safety limits come from the rig config.

Nodes, parameters and remappings come from `sgvla.launch.plan` (the description `sgvla launch hardware`
runs), resolved with this launch's arguments (`sgvla_ros.launch_description`).
"""

from sgvla_ros.launch_description import describe


def generate_launch_description():
    return describe("hardware")
