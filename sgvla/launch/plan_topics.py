"""The topics a launch plan's nodes publish, by name: what a viewer layout (config/foxglove/, config/rviz/) may name.

Read from the plan (its nodes, their executables and parameters) and the interface tables of `sgvla.launch.topics`:
a table row counts when one of its publishers is among the plan's executables (every table is read, since
`so101_eval sim=true` plans sim_eval's nodes), `{camera}` stands for each camera the nodes name (their `cameras`
and `camera` parameters), and a topic a node makes only with a parameter on (`OPTIONAL`) counts only when that
parameter is on in the plan (its node's value, else the parameter file's, else the node's default `True`).
"""

from __future__ import annotations

from sgvla.launch.registry import Plan
from sgvla.launch.topics import HARDWARE_TOPICS, SO101_EVAL_TOPICS, TOPICS, Topic

TABLES = (TOPICS, HARDWARE_TOPICS, SO101_EVAL_TOPICS)
# (executable, topic) -> the boolean parameter without which that node does not make the topic.
OPTIONAL = {("scene_graph", "scene_graph/{camera}/overlay"): "overlay",
            ("scene_graph", "scene_graph/markers"): "scene_markers",
            ("so101_twin", "scene_graph/markers"): "scene_markers",
            ("fiducial_graphs", "scene_graph/markers"): "scene_markers"}


def _parameter(plan: Plan, node, name: str):
    import yaml

    if name in node.parameters:
        return node.parameters[name]
    file = yaml.safe_load(plan.params_file.read_text()) or {}
    return file.get(node.name, {}).get("ros__parameters", {}).get(name, True)


def _makes(plan: Plan, node, topic: Topic) -> bool:
    if node.executable not in topic.publishers:
        return False
    flag = OPTIONAL.get((node.executable, topic.name))
    return flag is None or _parameter(plan, node, flag) is True


def plan_cameras(plan: Plan) -> list[str]:
    """The cameras the plan's nodes name, in order of appearance."""
    out: list[str] = []
    for node in plan.nodes:
        names = list(node.parameters.get("cameras", [])) + [node.parameters.get("camera", "")]
        out += [c for c in names if c and c not in out]
    return out


def plan_topics(plan: Plan) -> dict[str, Topic]:
    """Topic name (relative, `{camera}` expanded; `/clock` absolute) -> its table row, for every topic the plan's
    nodes publish."""
    cameras = plan_cameras(plan)
    out: dict[str, Topic] = {}
    for table in TABLES:
        for topic in table:
            if topic.qos in ("service", "action") or not any(_makes(plan, n, topic) for n in plan.nodes):
                continue
            for camera in cameras if "{camera}" in topic.name else [""]:
                out.setdefault(topic.name.format(camera=camera), topic)
    return out
