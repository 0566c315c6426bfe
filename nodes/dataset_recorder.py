"""LeRobot dataset from the hardware topics: `sgvla record`'s loop and layout, fed by ROS instead of the arms.

Samples, at the rig's control rate, the newest ``joint_states`` (observation.state), ``joint_commands``
(action: the goal as commanded, with teleop the leader's joints by remapping; `sgvla record` stores the goal
after the arm's clamping, which the topics do not carry) and each camera's
``<camera>/image_raw`` (with ``<camera>/depth/image_raw`` of the same stamp) into an EpisodeStore, through the
TeleopRecorder loop of ``sgvla record``; an arm or twin node elsewhere does the moving. Without a command for
the rig's command_timeout_s the action is the state (the arm holds). Episodes: ``record_control`` (start, save,
toggle, rerecord, abort, quit) or auto_start; the node exits after ``episodes`` saved episodes, so it can end a
launch. ``task`` empty: the ``task`` topic's (the twin's prompt). With ``reset_seed`` >= 0 (the twin), every
finished episode (saved or not) is followed by a scene reset on ``twin/reset`` (seed: reset_seed + episodes
finished). Silent joint_states end the node (exit 1); a silent camera discards the episode being recorded.
"""

import time
from pathlib import Path

import numpy as np
from sensor_msgs.msg import Image, JointState
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import ResourceNode, run_node
from sgvla_ros.teleop_recorder import OperatorKeys
from std_msgs.msg import Int64, String

from sgvla.so101.cameras import CAMERAS
from sgvla.so101.hardware.arm import ArmFault, ArmState
from sgvla.so101.hardware.cameras import Camera, CameraError, PushedSource
from sgvla.so101.hardware.config import load_hardware_config
from sgvla.so101.hardware.joints import from_radians
from sgvla.so101.hardware.recording import EpisodeStore, TeleopRecorder, dataset_features, operator_help
from sgvla.so101.hardware.safety import Watchdog
from sgvla.so101.recording import RecordingSettings


def pixels(msg: Image) -> np.ndarray:
    """rgb8 -> (H, W, 3) uint8; 16UC1 -> (H, W, 1) uint16 (row padding dropped)."""
    kinds = {"rgb8": (np.dtype(np.uint8), 3), "16UC1": (np.dtype("<u2"), 1)}
    if msg.encoding not in kinds:
        raise CameraError(f"image encoding {msg.encoding!r}; expected one of {list(kinds)}")
    dtype, channels = kinds[msg.encoding]
    rows = np.frombuffer(bytes(msg.data), dtype=dtype).reshape(msg.height, -1)
    return rows[:, :msg.width * channels].reshape(msg.height, msg.width, channels).astype(dtype.newbyteorder("="))


class LatestJoints:
    """The newest joints of a JointState topic in LeRobot units, and their age: TeleopRecorder's leader."""

    def __init__(self, topic: str, timeout_s: float):
        self.topic, self.positions, self.watchdog = topic, {}, Watchdog(timeout_s)

    def update(self, msg: JointState) -> None:
        self.positions = {**self.positions, **from_radians(msg.name, msg.position)}
        self.watchdog.feed()

    def read(self) -> ArmState:
        return ArmState(dict(self.positions), self.watchdog.last_feed or 0.0)

    def close(self) -> None:
        pass


class TopicFollower(LatestJoints):
    """joint_states as TeleopRecorder's follower: "sending" a goal records the command, or nothing (None: the
    arm holds) once commands are stale."""

    def __init__(self, timeout_s: float, commands: LatestJoints):
        super().__init__("joint_states", timeout_s)
        self.commands, self.goal = commands, {}

    def read(self) -> ArmState:
        if self.watchdog.stale:
            raise ArmFault(f"joint_states: no message for {self.watchdog.timeout_s:g} s (arm or twin node down?)",
                           None)
        return super().read()

    def command(self, goal: dict) -> None:
        self.goal = goal

    def step(self) -> dict | None:
        return None if self.commands.watchdog.stale else {**self.positions, **self.goal}


class DatasetRecorder(ResourceNode):
    def __init__(self, **kwargs):
        super().__init__("dataset_recorder", **kwargs)
        self.declare_parameter("config", "so101")  # rig: control rate, cameras, command timeout
        self.settings = self.declare_settings(RecordingSettings)  # root, task, episodes, ...: `sgvla record`'s
        self.declare_parameter("cameras", list(CAMERAS))  # rig camera names to record
        self.declare_parameter("input_timeout_s", 2.0, minimum=0.0)  # silent inputs: the node or the episode ends
        self.declare_parameter("reset_seed", -1, minimum=-1)  # >= 0: reset the twin's scene after each episode
        self.param = lambda name: self.get_parameter(name).value
        if not self.settings.root:
            raise ValueError("dataset_recorder: set the 'root' parameter (dataset folder)")
        rig = load_hardware_config(self.param("config"))
        by_name = {c.name: c for c in rig.cameras}
        missing = [n for n in self.param("cameras") if n not in by_name]
        if missing:
            raise ValueError(f"dataset_recorder: camera(s) {missing} not in the rig config; it has {list(by_name)}")
        self.fps, self.task = round(rig.control_rate_hz), self.settings.task
        self.commands = LatestJoints("joint_commands", rig.safety.command_timeout_s)
        self.follower = TopicFollower(self.param("input_timeout_s"), self.commands)
        self.sources = {n: PushedSource(by_name[n], self.param("input_timeout_s")) for n in self.param("cameras")}
        self.pending: dict[str, dict] = {n: {} for n in self.sources}  # stamp -> color or depth, to pair them
        self.cameras: list[Camera] = []
        self.store = self.own(EpisodeStore(  # closing drops an unsaved episode
            Path(self.settings.root), self.settings.repo_id, self.fps,
            dataset_features({n: (s.config.height, s.config.width, s.config.depth) for n, s in self.sources.items()})))
        self.keys, self.recorder = self.own(OperatorKeys()), None
        self.reset_pub, self.finished = self.create_publisher(Int64, "twin/reset", QOS["reliable"]), 0
        self.blocked = False  # the last tick held the executor (a save) long enough for the inputs to look stale
        self.create_subscription(JointState, "joint_states", lambda m: self.on_joints(self.follower, m), QOS["sensor"])
        self.create_subscription(JointState, "joint_commands", lambda m: self.on_joints(self.commands, m),
                                 QOS["commands"])
        self.create_subscription(String, "task", self.on_task, QOS["latched"])
        self.create_subscription(String, "record_control", self.on_control, QOS["reliable"])
        for name, source in self.sources.items():
            self.create_subscription(Image, f"{name}/image_raw", lambda m, n=name: self.on_image(n, "color", m),
                                     QOS["sensor"])
            if source.config.depth:
                self.create_subscription(Image, f"{name}/depth/image_raw",
                                         lambda m, n=name: self.on_image(n, "depth", m), QOS["sensor"])
        self.create_timer(1.0 / self.fps, self.tick)
        self.get_logger().info(f"{operator_help(self.keys.terminal is not None)}; dataset {self.settings.root} has "
                               f"{self.store.episodes} episode(s); waiting for joint_states and cameras "
                               f"{list(self.sources)}")

    def on_joints(self, joints: LatestJoints, msg: JointState):
        try:
            joints.update(msg)
        except ValueError as e:  # names that are not the arm's: ignored, as the arm refuses them
            self.get_logger().error(f"{joints.topic}: {e}", throttle_duration_sec=2.0)

    def on_task(self, msg: String):
        self.task = self.task or msg.data

    def on_control(self, msg: String):
        try:
            self.keys.topic.put(msg.data.strip())
        except ValueError as e:
            self.get_logger().error(str(e))

    def on_image(self, name: str, kind: str, msg: Image):
        source, key = self.sources[name], (msg.header.stamp.sec, msg.header.stamp.nanosec)
        try:
            parts = self.pending[name].setdefault(key, {})
            parts[kind] = pixels(msg)
            if "color" in parts and ("depth" in parts or not source.config.depth):
                source.push(parts["color"], parts.get("depth"))
                self.pending[name] = {k: v for k, v in self.pending[name].items() if k > key}
            elif len(self.pending[name]) > 8:  # a half without its other half (best effort dropped it)
                self.pending[name].pop(min(self.pending[name]))
        except CameraError as e:
            self.get_logger().error(f"{name}: {e}", throttle_duration_sec=5.0)

    def tick(self):
        if self.recorder is None and not self.begin():
            return
        if self.blocked:
            # After a tick that blocked the executor (saving an episode takes seconds), its next wait yields this
            # overdue timer before the subscriptions whose messages came in meanwhile: ticking now would read the
            # inputs as silent for the whole block and end the node. Skip once; they are taken first.
            self.blocked = False
            return
        started = time.monotonic()
        try:
            self.recorder.tick()
        except ArmFault as e:  # silent joint_states: the episode being recorded is discarded (destroy_node)
            self.get_logger().fatal(str(e))
            raise SystemExit(1) from e
        self.blocked = time.monotonic() - started > self.param("input_timeout_s") / 2
        stats = self.recorder.stats
        if self.param("reset_seed") >= 0 and stats.saved + stats.discarded > self.finished:
            self.finished = stats.saved + stats.discarded
            self.reset_pub.publish(Int64(data=self.param("reset_seed") + self.finished))
        if self.recorder.done:
            self.get_logger().info(f"saved {stats.saved} episode(s), {stats.frames} frames ({sum(stats.filled)} "
                                   f"recorded twice: the loop was late); discarded "
                                   f"{stats.discarded}; camera frames repeated {stats.repeated}, skipped "
                                   f"{stats.skipped}; dataset has {self.store.episodes} episode(s)")
            raise SystemExit(0)

    def begin(self) -> bool:
        """Start the loop once joint states, a frame of every camera and the task are in."""
        missing = [f"{n}/image_raw" + (" and depth" if s.config.depth else "")
                   for n, s in self.sources.items() if not s.ready]
        missing += (["joint_states"] if self.follower.watchdog.stale else []) + ([] if self.task else ["task"])
        if missing:
            self.get_logger().info(f"waiting for {', '.join(missing)}", throttle_duration_sec=10.0)
            return False
        # A save blocks this node's callbacks for seconds, and the cameras read as lost meanwhile: they are back
        # within reconnect_s of the next frame (a start asked for before that waits for them).
        self.cameras = [self.own(Camera(s.config, source=s, reconnect_s=0.1).start(first_frame_timeout_s=1.0))
                        for s in self.sources.values()]
        rec = self.settings
        self.recorder = TeleopRecorder(self.follower, self.commands, self.cameras, self.store, self.task, self.fps,
                                       self.keys, rec.episodes, rec.episode_time_s, rec.reset_time_s, rec.auto_start)
        self.get_logger().info(f"inputs ready; recording {rec.episodes} episode(s) of {self.task!r} at "
                               f"{self.fps} Hz" + (" (auto start)" if rec.auto_start else ""))
        return True


def main(args=None):
    raise SystemExit(run_node(DatasetRecorder, args))


if __name__ == "__main__":
    main()
