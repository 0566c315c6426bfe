"""Graph-injected evaluation of the SO101: on the physical arm with an operator, or unattended in its MuJoCo twin.

    ros2 launch sgvla_ros so101_eval.launch.py config:=/path/rig.yaml eval_config:=config/eval/so101_hardware.yaml
    ros2 topic pub --once /eval/confirm std_msgs/String "data: start"              # the scene is set
    ros2 topic pub --once /eval/verdict std_msgs/String "data: 'failure dropped the bowl'"   # success|failure|invalid
    ros2 launch sgvla_ros so101_eval.launch.py sim:=true eval_config:=config/eval/so101_twin_ambiguous.yaml

``sim:=false`` (default): so101_arm, the rig's cameras, arm_policy (home pose at bounded speed, the operator's
confirm on eval/confirm, the policy at the control rate, the verdict on eval/verdict; the operator's lines on
eval/operator) and the evaluator, which writes the same episodes.jsonl and report as `sgvla eval`; record:=FOLDER
adds bag_recorder. ``sim:=true``: sim_eval's nodes on the twin's plan. The launch ends when the evaluator exits.

Nodes, parameters and remappings come from `sgvla.launch.plan` (the description `sgvla launch so101_eval`
runs), resolved with this launch's arguments (`sgvla_ros.launch_description`).
"""

from sgvla_ros.launch_description import describe


def generate_launch_description():
    return describe("so101_eval")
