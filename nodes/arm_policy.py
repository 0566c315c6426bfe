"""arm_policy: runs evaluation episodes (the `run_episode` action) on the physical arm, with an operator.

The hardware counterpart of vla_policy: the evaluator sends it the same goals. An episode is the operator's
protocol, `sgvla.nodegraph.arm_protocol` (ROS-free; its docstring is the protocol: homing at bounded speed, the
scene card and `start`, the run, the verdict and its correction window, perception, learned policies, rollouts).
This node is its shell over topics:

- in: `joint_states`, `<camera>/image_raw` (the rollouts' cameras, a learned policy's), `scene_graph/<view>`
  (source fiducial), `perception/objects`, `eval/confirm`, `eval/verdict`, and the node's terminal when its stdin
  is one and `keyboard` is true (`sgvla launch so101_eval` in a terminal hands it on; `ros2 launch` gives none);
- out: `joint_commands` (radians), `eval/operator` (latched; each line in the log too), `task` (latched).
"""

import sys
import threading

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String

import sgvla.plugins  # noqa: F401  (registers suites, policies, context modes)
from sgvla.core.episode import EpisodeKey
from sgvla.nodegraph.arm_protocol import VIEWS, ArmGoal, ArmPorts, ArmProtocol, ArmSettings
from sgvla.paths import resolve_data_path
from sgvla.so101.cameras import CAMERAS
from sgvla.so101.hardware.config import load_hardware_config
from sgvla.so101.hardware.joints import to_radians
from sgvla.so101.perception.fiducials import load_marker_config
from sgvla_interfaces.action import RunEpisode
from sgvla_interfaces.msg import ObjectStates, SceneGraph
from sgvla_ros.graph_io import upright_image_of
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import ResourceNode, run_node, sleep
from sgvla_ros.state_io import record_msg, values_of


class ArmPolicy(ResourceNode):
    def __init__(self, **kwargs):
        super().__init__("arm_policy", **kwargs)
        self.declare_parameter("config", "so101")  # rig: its safety limits bound the home goals too
        self.declare_parameter("joint_timeout_s", 5.0)  # no joint state for this long: an infrastructure failure
        self.declare_parameter("keyboard", True)  # also read the operator's lines from stdin when it is a terminal
        self.declare_parameter("markers", "config/perception/so101_markers.yaml")  # objects' extents (perception)
        self.declare_parameter("perception_timeout_s", 1.0)  # perceived objects or graph older: infrastructure failure
        # rig cameras recorded in the rollouts ([""]: none); sgvla.so101.cameras.CAMERAS, a literal for the
        # parameter table (tests/hardware/test_arm_protocol.py checks they agree)
        self.declare_parameter("cameras", list(CAMERAS))
        self.declare_parameter("image_timeout_s", 1.0)  # a camera image older than this: infrastructure failure
        self.declare_parameter("rollouts", "")  # LeRobot dataset folder of the episodes' rollouts; empty: none
        self.declare_parameter("rollout_repo_id", "local/so101_eval_rollouts")
        self.declare_parameter("min_inference_s", 0.0)  # learned policies: pad each chunk's inference to this long
        self.declare_parameter("refill_at", 0.5)  # learned policies: next chunk when this share of the current is left
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        settings = ArmSettings.of_rig(
            load_hardware_config(param("config")), param("cameras"),
            markers=load_marker_config(resolve_data_path(param("markers"))),
            joint_timeout_s=float(param("joint_timeout_s")), perception_timeout_s=float(param("perception_timeout_s")),
            image_timeout_s=float(param("image_timeout_s")),
            rollouts=param("rollouts"), rollout_repo_id=param("rollout_repo_id"),
            learned={"min_inference_s": float(param("min_inference_s")), "refill_at": float(param("refill_at"))})
        self.command_pub = self.create_publisher(JointState, "joint_commands", QOS["commands"])
        self.operator_pub = self.create_publisher(String, "eval/operator", QOS["latched"])
        task_pub = self.create_publisher(String, "task", QOS["latched"])
        ports = ArmPorts(command=self.command, say=self.say, publish_task=lambda t: task_pub.publish(String(data=t)),
                         sleep=lambda seconds: sleep(self, seconds), subscribe_images=self.subscribe_images,
                         decode_image=upright_image_of, log_error=self.get_logger().error)
        self.protocol = self.own(ArmProtocol(settings, ports))  # closed with the node: rollouts, policies
        protocol = self.protocol
        self.create_subscription(ObjectStates, "perception/objects", protocol.on_objects, QOS["reliable"])
        for view in VIEWS:
            self.create_subscription(SceneGraph, f"scene_graph/{view}", self.on_graph, QOS["reliable"])
        self.create_subscription(JointState, "joint_states", lambda m: protocol.on_joints(m.name, m.position),
                                 QOS["sensor"])
        self.create_subscription(String, "eval/confirm", lambda m: protocol.on_confirm(m.data), QOS["reliable"])
        self.create_subscription(String, "eval/verdict", lambda m: protocol.on_verdict(m.data), QOS["reliable"])
        # An episode is one coroutine; in a group of its own it never blocks the inputs it awaits.
        self.server = ActionServer(self, RunEpisode, "run_episode", execute_callback=self.execute,
                                   goal_callback=lambda _: GoalResponse.REJECT if protocol.busy else GoalResponse.ACCEPT,
                                   cancel_callback=lambda _: CancelResponse.ACCEPT,
                                   callback_group=ReentrantCallbackGroup())
        keyboard = bool(param("keyboard")) and sys.stdin is not None and sys.stdin.isatty()
        protocol.or_keys = " (or type it here)" if keyboard else ""
        if keyboard:  # a daemon thread: a blocked read must not keep the process alive
            threading.Thread(target=self.read_keyboard, name="operator_keyboard", daemon=True).start()
        self.get_logger().info("ready: episodes on the arm, operator on eval/operator, eval/confirm, eval/verdict"
                               + (" and this terminal" if keyboard else ""))

    def subscribe_images(self, camera: str) -> None:
        self.create_subscription(Image, f"{camera}/image_raw", lambda m: self.protocol.on_image(camera, m),
                                 QOS["sensor"])

    def on_graph(self, msg: SceneGraph) -> None:
        if msg.source == SceneGraph.SOURCE_FIDUCIAL:
            self.protocol.on_graph(msg.camera, msg)

    def read_keyboard(self) -> None:
        for line in sys.stdin:
            self.protocol.on_keyboard(line)

    def say(self, text: str) -> None:
        """A line for the operator: on eval/operator (latched) and in the log."""
        self.operator_pub.publish(String(data=text))
        self.get_logger().info(f"operator: {text}")

    def command(self, goal: dict[str, float]) -> None:
        msg = JointState(name=list(goal), position=to_radians(goal))
        msg.header.stamp = self.get_clock().now().to_msg()
        self.command_pub.publish(msg)

    async def execute(self, goal_handle):
        g = goal_handle.request
        record = await self.protocol.run(ArmGoal(
            EpisodeKey(g.policy, int(g.task_id), g.perturbation, g.mode, int(g.seed)), int(g.episode),
            int(g.max_steps), g.view, g.suite, values_of(g.suite_options), g.policy_type, values_of(g.policy_options)))
        goal_handle.succeed()
        return RunEpisode.Result(record=record_msg(record))


def main(args=None):
    raise SystemExit(run_node(ArmPolicy, args))


if __name__ == "__main__":
    main()
