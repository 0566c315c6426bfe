"""Publish scene graphs from a JSONL file of graph records (replay of recorded or VLM graphs)."""

import json
from pathlib import Path

from rclpy.duration import Duration

from sgvla_interfaces.msg import SceneGraph
from sgvla_ros.runtime import SgvlaNode, positive_parameter, run_node
from sgvla_ros.conversions import record_to_msg
from sgvla_ros.qos import QOS


class GraphPublisher(SgvlaNode):
    def __init__(self):
        super().__init__("graph_publisher")
        self.declare_parameter("input", "")
        self.declare_parameter("topic", "scene_graph")
        self.declare_parameter("rate_hz", 10.0)
        self.declare_parameter("wait_for_subscribers", 0)
        path = Path(self.get_parameter("input").value)
        if not path.is_file():
            raise FileNotFoundError(f"graph_publisher: input file not found: '{path}'")
        self.records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        self.wait_for = self.get_parameter("wait_for_subscribers").value
        self.publisher = self.create_publisher(SceneGraph, self.get_parameter("topic").value, QOS["reliable"])
        self.index = 0
        self.timer = self.create_timer(1.0 / positive_parameter(self, "rate_hz"), self.tick)

    def tick(self):
        if self.index == 0 and self.publisher.get_subscription_count() < self.wait_for:
            return
        if self.index == len(self.records):
            self.timer.cancel()
            self.publisher.wait_for_all_acked(Duration(seconds=5.0))
            self.get_logger().info(f"published {self.index} graphs")
            raise SystemExit(0)
        msg = record_to_msg(self.records[self.index])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.publisher.publish(msg)
        self.index += 1


def main(args=None):
    raise SystemExit(run_node(GraphPublisher, args))


if __name__ == "__main__":
    main()
