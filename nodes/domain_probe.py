"""Which ROS nodes are on this process's domain: `sgvla launch --domain-id N` asks before it starts its own.

    python -m sgvla_ros.domain_probe --wait SECONDS

Joins the domain (ROS_DOMAIN_ID and the loopback-only DDS environment come from the caller: sgvla.launch.ros_domain runs
it with `sgvla.core.ros_env.loopback_env`) as one short-lived participant with one node, waits for discovery and prints
one JSON line: {"nodes": ["/namespace/name", ...], "waited_s": ...}. It stops waiting early once it has seen nodes
and their list stayed the same for SETTLE_S; an empty domain costs the whole wait. The node publishes nothing (no
rosout, no parameter services), so the participants already there only see it come and go.
"""

import argparse
import json
import sys
import time

import rclpy
from rclpy.signals import SignalHandlerOptions

NAME = "sgvla_domain_probe"
SETTLE_S = 1.0  # nodes seen: the list has not changed for this long
POLL_S = 0.05


def discovered_nodes(node, own: str) -> set[str]:
    return {f"{ns.rstrip('/')}/{name}" for name, ns in node.get_node_names_and_namespaces()} - {own}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sgvla_ros.domain_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--wait", type=float, required=True, help="seconds to wait at most for discovery (of the "
                        "participants there, then of their nodes' names); sgvla.launch.ros_domain says how long")
    args = parser.parse_args(argv)
    rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO)
    start = time.monotonic()
    try:
        node = rclpy.create_node(NAME, enable_rosout=False, start_parameter_services=False)
        own = f"{node.get_namespace().rstrip('/')}/{node.get_name()}"
        seen: set[str] = set()
        changed = time.monotonic()
        while time.monotonic() - start < args.wait:
            now = discovered_nodes(node, own)
            if not now <= seen:  # new names (one that left stays listed: it was there)
                seen, changed = seen | now, time.monotonic()
            elif seen and time.monotonic() - changed >= SETTLE_S:
                break
            time.sleep(POLL_S)
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
    print(json.dumps({"nodes": sorted(seen), "waited_s": round(time.monotonic() - start, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
