"""Append every scene graph received on a topic to a JSONL file, one record per message."""

import json
from pathlib import Path


from sgvla_interfaces.msg import SceneGraph
from sgvla_ros.runtime import ResourceNode, run_node
from sgvla_ros.conversions import msg_to_record
from sgvla_ros.qos import QOS


class GraphRecorder(ResourceNode):
    def __init__(self):
        super().__init__("graph_recorder")
        self.declare_parameter("output", "scene_graphs.jsonl")
        self.declare_parameter("topic", "scene_graph")
        self.declare_parameter("count", 0)  # stop after this many messages; 0 records until shutdown
        self.count = self.get_parameter("count").value
        self.received = 0
        self.file = self.own(Path(self.get_parameter("output").value).open("a", encoding="utf-8"))
        self.create_subscription(SceneGraph, self.get_parameter("topic").value, self.on_graph, QOS["reliable"])

    def on_graph(self, msg: SceneGraph):
        self.file.write(json.dumps(msg_to_record(msg)) + "\n")
        self.file.flush()
        self.received += 1
        if self.count and self.received >= self.count:
            raise SystemExit(0)


def main(args=None):
    raise SystemExit(run_node(GraphRecorder, args))


if __name__ == "__main__":
    main()
