"""SO101 leader arm as a teleoperation source: the positions a hand gives it, as JointState goals.

Publishes on ``leader/joint_states`` (radians, URDF names) at the control rate with the arm's command
QoS, so the follower teleoperates when its ``joint_commands`` is remapped there (hardware.launch.py
``teleop:=true``). Torque stays off; a motor that stops answering ends the node. A managed (lifecycle) node:
configure connects, activate streams, deactivate stops streaming, cleanup releases the port.
"""

from sensor_msgs.msg import JointState
from sgvla_ros.runtime import HardwareNode, run_node
from sgvla_ros.qos import QOS
from sgvla_ros.so101_arm import arm_overrides, joint_state

from sgvla.so101.hardware.arm import ArmFault, LeaderArm
from sgvla.launch.hardware import SIM_LEADER_PORT
from sgvla.so101.hardware.config import load_hardware_config


class SO101Leader(HardwareNode):
    def __init__(self, **kwargs):
        super().__init__("so101_leader", **kwargs)
        self.declare_parameter("config", "so101")
        self.declare_parameter("port", "")
        self.declare_parameter("calibration_id", "")
        self.declare_parameter("calibration_dir", "")
        self.rig = load_hardware_config(self.get_parameter("config").value, arm_overrides(self, "leader"))
        if self.rig.leader.port == SIM_LEADER_PORT:
            self.serve_simulated_leader()
        self.arm: LeaderArm | None = None
        self.timer = None
        self.publisher = self.create_lifecycle_publisher(JointState, "leader/joint_states", QOS["commands"])

    def serve_simulated_leader(self):
        """port `sim_leader` (the launch's teleop=sim_leader): a simulated leader on a Feetech bus of its own, its
        joints swinging by themselves, with a calibration that fits it; both go when the node does."""
        import tempfile

        from sgvla.so101.hardware.calibration import write_arm_calibration
        from sgvla.so101.hardware.sim_bus import LEADER_MOTION, SimFeetechBus, sim_calibration

        bus = self.own(SimFeetechBus(motion=LEADER_MOTION))
        folder = tempfile.TemporaryDirectory(prefix="sgvla_leader_")
        self.own(folder, folder.cleanup)
        write_arm_calibration(f"{folder.name}/{self.rig.leader.id}.json", sim_calibration())
        self.rig.leader.port, self.rig.leader.calibration_dir = bus.port, folder.name
        self.get_logger().info(f"simulated leader on {bus.port}")

    def connect(self):
        self.arm = self.own(LeaderArm(self.rig.leader))
        self.arm.connect()

    def activate(self):
        self.timer = self.create_timer(1.0 / self.rig.control_rate_hz, self.tick)
        self.get_logger().info(f"leader on {self.rig.leader.port} at {self.rig.control_rate_hz:g} Hz")

    def deactivate(self):
        self.destroy_timer(self.timer)

    def tick(self):
        try:
            state = self.arm.read()
        except ArmFault as e:
            self.get_logger().fatal(str(e))
            raise SystemExit(1) from e
        self.publisher.publish(joint_state(self, state.positions))


def main(args=None):
    raise SystemExit(run_node(SO101Leader, args))


if __name__ == "__main__":
    main()
