"""SO101 follower arm: joint states out, position commands in, with sgvla's safety layer always on.

Publishes sensor_msgs/JointState on ``joint_states`` (radians, URDF joint names) at the control rate
and follows JointState goals on ``joint_commands`` (any subset of joints, radians): clamped to the
joint limits, at most ``max_step`` per tick from the present position, held in place once no
command arrived for ``command_timeout_s``. A motor that stops answering ends the node with torque off.

QoS: joint states are sensor data (best effort, latest wins). Commands are reliable with depth 1:
the newest goal always arrives and an old one never queues behind it; the leader arm publishes
with the same profile so that remapping ``joint_commands`` to ``leader/joint_states`` teleoperates.

A managed (lifecycle) node: configure connects (torque stays off), activate turns torque on holding the present
pose and streams, deactivate holds (torque on, no stream, commands ignored), cleanup turns torque off and releases
the port. It configures and activates itself at start unless ``autostart`` is false.
"""

from rclpy.node import Node
from sensor_msgs.msg import JointState
from sgvla_ros.runtime import HardwareNode, run_node
from sgvla_ros.qos import QOS

from sgvla.so101.hardware.arm import ArmFault, FollowerArm
from sgvla.so101.hardware.config import load_hardware_config
from sgvla.so101.hardware.joints import JOINTS, from_radians, to_radians
from sgvla.so101.hardware.safety import UnsafeCommand



def arm_overrides(node: Node, role: str) -> dict:
    """Rig config overrides from the node's parameters (empty parameters keep the config's values)."""
    keys = {"port": f"{role}.port", "calibration_id": f"{role}.id", "calibration_dir": f"{role}.calibration_dir"}
    return {key: node.get_parameter(param).value for param, key in keys.items() if node.get_parameter(param).value}


def joint_state(node: Node, positions: dict[str, float]) -> JointState:
    msg = JointState(name=list(JOINTS), position=to_radians(positions))
    msg.header.stamp = node.get_clock().now().to_msg()
    return msg


class SO101Arm(HardwareNode):
    def __init__(self, **kwargs):
        super().__init__("so101_arm", **kwargs)
        self.declare_parameter("config", "so101")  # rig: a name in config/hardware/ or a YAML path
        self.declare_parameter("port", "")
        self.declare_parameter("calibration_id", "")
        self.declare_parameter("calibration_dir", "")
        self.rig = load_hardware_config(self.get_parameter("config").value, arm_overrides(self, "follower"))
        self.arm: FollowerArm | None = None
        self.timer = None
        self.following = False  # sending commanded goals (else holding); transitions are logged
        self.publisher = self.create_lifecycle_publisher(JointState, "joint_states", QOS["sensor"])
        self.create_subscription(JointState, "joint_commands", self.on_command, QOS["commands"])

    def connect(self):
        rig = self.rig
        self.arm = self.own(FollowerArm(rig.follower, rig.safety))  # cleanup, shutdown, destroy: torque off
        self.arm.connect()
        self.arm.set_torque(False)
        self.get_logger().info(f"follower on {rig.follower.port} (torque off until active)")

    def activate(self):
        self.arm.set_torque(True)  # holding the present pose
        self.timer = self.create_timer(1.0 / self.rig.control_rate_hz, self.tick)
        self.get_logger().info(f"active: torque on, {self.rig.control_rate_hz:g} Hz")

    def deactivate(self):
        self.destroy_timer(self.timer)
        self.arm.hold()  # torque stays on where the arm is
        self.following = False

    def on_command(self, msg: JointState):
        if not self.active:
            return
        try:
            self.arm.command(from_radians(msg.name, msg.position))
        except (ValueError, UnsafeCommand) as e:  # refused whole; the previous target stands
            self.get_logger().error(f"command refused: {e}", throttle_duration_sec=2.0)

    def tick(self):
        try:
            state = self.arm.read()
            following = self.arm.step() is not None
        except ArmFault as e:
            self.get_logger().fatal(f"{e}; last good state: {e.last_state}")
            raise SystemExit(1) from e
        if following != self.following:
            self.following = following
            self.get_logger().info("following joint_commands" if following else
                                   f"holding: no command for {self.rig.safety.command_timeout_s:g} s")
        self.publisher.publish(joint_state(self, state.positions))


def main(args=None):
    raise SystemExit(run_node(SO101Arm, args))


if __name__ == "__main__":
    main()
