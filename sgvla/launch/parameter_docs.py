"""What each node parameter is for, read from the parameter files (`config/ros/*.yaml`), the one place parameters are
documented: every `name: value  # what it is` line under a node's `ros__parameters`. The nodes give these texts to
ROS as their parameters' descriptions (`ros2 param describe`)."""

from __future__ import annotations

import re
from functools import cache

from sgvla.paths import CONFIG_DIR

_NODE = re.compile(r"^(\w+):\s*$")
_PARAMETER = re.compile(r"^\s+(\w+):[^#]*#\s*(.+?)\s*$")


@cache
def parameter_docs() -> dict[str, dict[str, str]]:
    """{node name: {parameter: its comment}} over every parameter file (the first file naming a node's parameter
    wins: the files repeat shared nodes' parameters with the same comments)."""
    docs: dict[str, dict[str, str]] = {}
    for path in sorted((CONFIG_DIR / "ros").glob("*.yaml")):
        node = None
        for line in path.read_text().splitlines():
            if m := _NODE.match(line):
                node = m[1]
            elif node and (m := _PARAMETER.match(line)) and m[1] != "ros__parameters":
                docs.setdefault(node, {}).setdefault(m[1], m[2])
    return docs


def parameter_doc(node: str, parameter: str) -> str:
    """The documented purpose of `node`'s `parameter`, or "" where no parameter file documents it."""
    return parameter_docs().get(node, {}).get(parameter, "")
