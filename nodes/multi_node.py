"""Several sgvla nodes in one process on one executor (`sgvla launch --single-process`).

    python -m sgvla_ros.multi_node NODES.yaml

NODES.yaml: {main: NAME, nodes: [{name, module, args: [--ros-args ...]}]}, written by `sgvla.launch.run`
from the same launch plan as the multi-process launch. Every node keeps its own command-line arguments
(name remap, parameter files, remappings). Messages still go through DDS. Exits with the main node's code
(130 when stopped by SIGINT/SIGTERM, which, as for one node, wait for every node's `destroy_node`; 1 when a
node's constructor raised: its error as one line, and the nodes built so far, it too, destroyed).
"""

import importlib
import inspect
import sys
import time

import rclpy
import yaml
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from sgvla_ros.runtime import (START_FAILED, NodeExit, StartFailed, build, destroy, init, report_start_failure,
                               spin_until_stopped)

DRAIN_S = 0.5


def node_class(module: str) -> type:
    mod = importlib.import_module(module)
    classes = [c for _, c in inspect.getmembers(mod, inspect.isclass) if issubclass(c, Node) and c is not Node
               and c.__module__ == mod.__name__]
    if len(classes) != 1:
        raise RuntimeError(f"{module} defines {len(classes)} node classes; expected one")
    return classes[0]


def drain(executor, nodes, main: str, seconds: float = DRAIN_S) -> None:
    """Let the other nodes (a recorder) take what the main node sent last before everything stops."""
    for node in nodes:
        if node.get_name() == main:
            executor.remove_node(node)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec = yaml.safe_load(open(argv[0]))
    stop = init()
    executor = SingleThreadedExecutor()
    nodes = []
    code = 0
    try:
        for item in spec["nodes"]:
            try:
                node = build(node_class(item["module"]), cli_args=item["args"], use_global_arguments=False)
            except StartFailed as e:
                nodes.append(e.node)
                report_start_failure(e, item["name"])
                return START_FAILED
            nodes.append(node)
            executor.add_node(node)
        spin_until_stopped(executor, stop)
        code = 130
    except NodeExit as e:
        code = e.code
        drain(executor, nodes, spec["main"])
    except ExternalShutdownException:
        code = 130
    finally:
        stop.ignore()
        for node in reversed(nodes):
            destroy(node)
        rclpy.try_shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
