"""bag_recorder: every topic of the run (or those listed) into a rosbag2 folder with one MCAP file.

Subscribes to topics as they are discovered, receives messages serialized (no deserialization), and writes
them with `sgvla.nodegraph.bag.BagWriter` (the rosbags package: no ROS install needed, and Foxglove or
`ros2 bag` read the file). Each subscription offers what the topic's publishers offer (reliable and
transient local only where all of them are), as `ros2 bag record` does. Graphs are readable as text
(`scene_graph/*`, `graph_context/*`, `prompt`) and as images (`scene_graph/*/overlay`).
"""

import time

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from sgvla.nodegraph.bag import BagWriter
from sgvla_ros.runtime import ResourceNode, run_node

SKIP = ("/rosout", "/parameter_events")


class BagRecorder(ResourceNode):
    def __init__(self, **kwargs):
        super().__init__("bag_recorder", **kwargs)
        self.declare_parameter("output", "run_bag")  # a rosbag2 folder, created (must not exist)
        self.declare_parameter("topics", [""])  # record only these (relative names resolve in the node's namespace)
        self.declare_parameter("discovery_period_s", 0.2)
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        self.only = {self.resolve_topic_name(t) for t in param("topics") if t}
        self.writer = self.own(BagWriter(param("output")), self.close_bag)
        self.subs: dict = {}
        self.discover()
        self.create_timer(float(param("discovery_period_s")), self.discover)
        self.get_logger().info(f"recording into {self.writer.path}")

    def discover(self):
        for topic, types in self.get_topic_names_and_types():
            if topic in self.subs or topic in SKIP or (self.only and topic not in self.only):
                continue
            msgtype = types[0]
            if not self.writer.knows(msgtype):
                self.get_logger().warning(f"not recording {topic}: unknown type {msgtype}", once=True)
                continue
            publishers = self.get_publishers_info_by_topic(topic)
            if not publishers:
                continue
            reliable = all(p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in publishers)
            latched = all(p.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in publishers)
            qos = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST,
                             reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)
            msg_class = _message_class(msgtype)
            self.writer.add_topic(topic, msgtype)
            self.subs[topic] = self.create_subscription(
                msg_class, topic, lambda data, t=topic: self.on_message(t, data), qos, raw=True)

    def on_message(self, topic: str, data: bytes):
        self.writer.write(topic, time.time_ns(), data)

    def close_bag(self):
        self.writer.close()
        total = sum(self.writer.counts.values())
        self.get_logger().info(f"wrote {total} messages on {len(self.writer.counts)} topics to {self.writer.path}")


def _message_class(msgtype: str):
    import importlib

    package, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), name)


def main(args=None):
    raise SystemExit(run_node(BagRecorder, args))


if __name__ == "__main__":
    main()
