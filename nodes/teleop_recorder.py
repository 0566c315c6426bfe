"""Leader -> follower teleoperation recorded into a LeRobot dataset: ``sgvla record`` as a ROS node.

Owns both arms and the rig's cameras (the same TeleopRecorder loop as ``sgvla record``, ticked by a
timer at the control rate) and publishes the follower's ``joint_states`` for observers. Operator
commands arrive on ``record_control`` (std_msgs/String: start, save, toggle, rerecord, abort, quit;
reliable) and, when the node runs in a terminal (``ros2 run``), from its keyboard. The node exits
when the episodes are recorded or on quit; an unsaved episode is never written.
"""

import sys
from pathlib import Path

from sensor_msgs.msg import JointState
from sgvla_ros.runtime import ResourceNode, run_node
from sgvla_ros.qos import QOS
from sgvla_ros.so101_arm import joint_state
from std_msgs.msg import String

from sgvla.so101.hardware.arm import FollowerArm, LeaderArm
from sgvla.so101.hardware.cameras import Camera
from sgvla.so101.hardware.config import load_hardware_config
from sgvla.so101.hardware.recording import (EpisodeStore, KeyQueue, TeleopRecorder, TerminalKeys, dataset_features,
                                            operator_help)
from sgvla.so101.recording import RecordingSettings


class OperatorKeys:
    """Commands from the record_control topic, then from the terminal if there is one."""

    def __init__(self):
        self.topic = KeyQueue()
        self.terminal = TerminalKeys().__enter__() if sys.stdin.isatty() else None

    def poll(self) -> str | None:
        return self.topic.poll() or (self.terminal.poll() if self.terminal else None)

    def close(self) -> None:
        if self.terminal:
            self.terminal.__exit__(None, None, None)


class TeleopRecorderNode(ResourceNode):
    def __init__(self):
        super().__init__("teleop_recorder")
        self.declare_parameter("config", "so101")
        rec = self.declare_settings(RecordingSettings)  # root, task, episodes, ...: `sgvla record`'s
        self.declare_parameter("follower_port", "")
        self.declare_parameter("leader_port", "")
        self.declare_parameter("calibration_dir", "")
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        if not rec.root or not rec.task:
            raise ValueError("teleop_recorder: set the 'root' (dataset folder) and 'task' parameters")
        overrides = {key: param(name) for name, key in {"follower_port": "follower.port", "leader_port": "leader.port",
                                                       "calibration_dir": "follower.calibration_dir"}.items()
                     if param(name)}
        if param("calibration_dir"):
            overrides["leader.calibration_dir"] = param("calibration_dir")
        rig = load_hardware_config(param("config"), overrides)
        # destroy_node releases them in reverse: keys, the store (an unsaved episode is dropped), cameras, arms
        self.follower = self.own(FollowerArm(rig.follower, rig.safety))
        self.follower.connect()
        self.leader = self.own(LeaderArm(rig.leader))
        self.leader.connect()
        self.cameras = [self.own(Camera(c).start()) for c in rig.cameras]
        fps = round(rig.control_rate_hz)
        features = dataset_features({c.name: (c.height, c.width, c.depth) for c in rig.cameras})
        self.store = self.own(EpisodeStore(Path(rec.root), rec.repo_id, fps, features))
        self.keys = self.own(OperatorKeys())
        self.recorder = TeleopRecorder(self.follower, self.leader, self.cameras, self.store, rec.task, fps,
                                       self.keys, rec.episodes, rec.episode_time_s, rec.reset_time_s, rec.auto_start)
        self.publisher = self.create_publisher(JointState, "joint_states", QOS["sensor"])
        self.create_subscription(String, "record_control", self.on_control, QOS["reliable"])
        self.create_timer(1.0 / fps, self.tick)
        self.get_logger().info(f"{operator_help(self.keys.terminal is not None)}; dataset {rec.root} "
                               f"has {self.store.episodes} episode(s)")

    def on_control(self, msg: String):
        try:
            self.keys.topic.put(msg.data.strip())
        except ValueError as e:
            self.get_logger().error(str(e))

    def tick(self):
        self.recorder.tick()  # an arm fault propagates: the episode is discarded, torque is off
        self.publisher.publish(joint_state(self, self.follower.last_state.positions))
        if self.recorder.done:
            stats = self.recorder.stats
            self.get_logger().info(f"saved {stats.saved} episode(s), {stats.frames} frames; discarded "
                                   f"{stats.discarded}; dataset has {self.store.episodes} episode(s)")
            raise SystemExit(0)


def main(args=None):
    raise SystemExit(run_node(TeleopRecorderNode, args))


if __name__ == "__main__":
    main()
