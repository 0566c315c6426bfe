"""What a launch starts: nodes, executables, parameters and remappings, per launch name.

One description read by both `launch/<name>.launch.py` (`ros2 launch sgvla_ros <name>.launch.py a:=b`) and
`sgvla launch <name> a=b`, so the two cannot drift. No ROS imports: the launch file turns a `Plan` into
launch_ros `Node` actions, `sgvla launch` into processes (or one multi-node process).

Launches are registered builders (`sgvla.launch.registry`), one module each: `sgvla.launch.sim_eval`,
`sgvla.launch.hardware`, `sgvla.launch.so101_eval`; each declares its typed arguments and topic table.
Parameters come from a ROS 2 parameter file (`config/ros/<name>.yaml`, every parameter documented) with
the launch arguments' values on top. `sgvla.launch.topics` holds the node graphs' interface tables (names, types,
QoS, frame ids, who publishes and subscribes); the README's table is `sgvla launch <name> --table`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sgvla.launch import hardware, sim_eval, so101_eval  # noqa: F401  (each registers its launch)
from sgvla.launch.nodes import QOS, describe_qos
from sgvla.launch.registry import ARGUMENTS, LAUNCHES, Argument, Launch, NodeSpec, Plan, registered  # noqa: F401
from sgvla.launch.so101_eval import OPERATOR_EPISODE_TIMEOUT_S, ROLLOUTS  # noqa: F401
from sgvla.launch.topics import (  # noqa: F401
    HARDWARE_NODE_ROLES,
    HARDWARE_TOPICS,
    NODE_ROLES,
    OTHER_ENDPOINTS,
    PERCEPTION_OBJECTS,
    SO101_EVAL_NODE_ROLES,
    SO101_EVAL_TOPICS,
    TOPICS,
    Topic,
    subscriber_counts,
)


def launch_names() -> list[str]:
    return sorted(LAUNCHES)


def resolve_arguments(name: str, args: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Launch `name`'s arguments as text: its defaults with `args` on top (unknown launches and arguments refused)."""
    return registered(name).resolve(args)


def parse_arguments(name: str, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Launch `name`'s arguments typed (booleans, integers, numbers, choices), each parsed by its declaration."""
    launch = registered(name)
    return launch.parse(launch.resolve(args))


def launch_plan(name: str, args: Mapping[str, Any] | None = None) -> Plan:
    """The nodes of launch `name` with its arguments (strings, as `ros2 launch` gives them) resolved."""
    return registered(name).plan(args)


def topic_table(cameras: tuple[str, ...] | None = None, launch: str = "sim_eval") -> str:
    """The README's Markdown tables: nodes, then topics with types, QoS and frame ids (so101_eval: on the arm).
    `{camera}` stands for `cameras` (default: the launch's, e.g. the default plan's suite's for sim_eval)."""
    entry = registered(launch)
    topics, roles = entry.topics, entry.roles
    rows = ["| node (executable) | role | publishes | subscribes |", "|---|---|---|---|"]
    for node, role in roles.items():
        pubs = [f"`{t.name}`" for t in topics if node in t.publishers]
        subs = [f"`{t.name}`" for t in topics if node in t.subscribers]
        pubs_text, subs_text = OTHER_ENDPOINTS.get(node, (", ".join(pubs) or "-", ", ".join(subs) or "-"))
        rows.append(f"| `{node}` | {role} | {pubs_text} | {subs_text} |")
    rows += ["", "| topic | type | QoS | frame_id | publisher | subscribers | what |", "|---|---|---|---|---|---|---|"]
    for t in topics:
        rows.append(f"| `{t.name}` | `{t.type}` | {t.qos} | {f'`{t.frame_id}`' if t.frame_id else '-'} | "
                    f"{', '.join(t.publishers) or '(tools, operator)'} | "
                    f"{', '.join(t.subscribers) or '(tools, recorder)'} | {t.what} |")
    rows.append("")
    rows += [f"- QoS `{name}`: {describe_qos(name)}" for name in QOS if any(t.qos == name for t in topics)
             or entry.every_qos]
    rows.append(entry.camera_note.format(cameras=", ".join(entry.cameras() if cameras is None else cameras)))
    return "\n".join(rows)
