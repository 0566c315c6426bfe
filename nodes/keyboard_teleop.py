"""Keyboard teleoperation of the follower (arm or twin): keys typed into this node's own terminal move joint goals.

Run it by hand next to the hardware launch, in a second terminal (`ros2 launch` gives nodes no stdin):

    ros2 run sgvla_ros keyboard_teleop --ros-args -p step:=2.0

The goal follows ``joint_states`` until the first key (sgvla.so101.hardware.keyboard has the keys); from then on the
whole goal goes out on ``joint_commands`` at ``rate_hz``, in radians with the command QoS: the leader's topic and
units, so the follower's safety layer applies unchanged and, once this node stops, its watchdog holds the arm.
"""

from sensor_msgs.msg import JointState
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import ResourceNode, positive_parameter, run_node
from sgvla_ros.so101_arm import joint_state

from sgvla.so101.hardware.joints import from_radians
from sgvla.so101.hardware.keyboard import KeyboardGoal, RawKeys, help_text


class KeyboardTeleop(ResourceNode):
    def __init__(self, **kwargs):
        super().__init__("keyboard_teleop", **kwargs)
        self.declare_parameter("step", 2.0)  # degrees (gripper: %) per key press
        self.declare_parameter("rate_hz", 30.0)  # goals per second, well above 1 / the follower's command_timeout_s
        step = self.get_parameter("step").value
        self.goal = KeyboardGoal(step)
        self.publisher = self.create_publisher(JointState, "joint_commands", QOS["commands"])
        self.create_subscription(JointState, "joint_states", self.on_state, QOS["sensor"])
        self.create_timer(1.0 / positive_parameter(self, "rate_hz"), self.tick)
        self.keys = self.resources.enter_context(RawKeys())  # the terminal is put back in destroy_node
        if not self.keys.stream.isatty():
            self.get_logger().warning("stdin is not a terminal: run this node with `ros2 run` in a terminal of its own")
        self.get_logger().info(help_text(step))

    def on_state(self, msg: JointState):
        waiting = self.goal.goal is None
        try:
            self.goal.seed(from_radians(msg.name, msg.position))
        except ValueError as e:
            self.get_logger().error(f"joint_states ignored: {e}", throttle_duration_sec=2.0)
        if waiting and self.goal.goal is not None:
            self.get_logger().info("arm position received: keys move it now")

    def tick(self):
        while (key := self.keys.poll()) is not None:
            moved = self.goal.press(key)
            if self.goal.goal is None:
                self.get_logger().warning("no joint_states yet: keys do nothing", throttle_duration_sec=2.0)
            elif moved:
                goal = ", ".join(f"{j} {v:.1f}" for j, v in self.goal.goal.items())
                self.get_logger().info(f"{moved}: goal {goal}", throttle_duration_sec=0.2)
        if self.goal.active:
            self.publisher.publish(joint_state(self, self.goal.goal))


def main(args=None):
    raise SystemExit(run_node(KeyboardTeleop, args))


if __name__ == "__main__":
    main()
