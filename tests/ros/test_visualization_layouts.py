"""The viewer layouts of each launch (Foxglove: config/foxglove/<launch>.json, RViz: config/rviz/<launch>.rviz) name
only topics the launch's plan has: every topic a panel or display shows is published by one of the plan's nodes
(`sgvla.launch.plan_topics`, read from the plan itself), each in every launch variant the layout is for; RViz
subscribes with a QoS the topic's publisher matches, and the fixed frame is the markers' frame. Nothing starts."""

import json
import re

import pytest
import yaml

from sgvla.launch.nodes import QOS
from sgvla.launch.plan import launch_plan
from sgvla.launch.plan_topics import plan_topics
from sgvla.paths import CONFIG_DIR

pytestmark = pytest.mark.ros

# layout -> the launch variants (launch arguments) it is for, and the markers' frame in them
VARIANTS = {
    "sim_eval": ([("sim_eval", {"record": "/tmp/never_written_bag"}), ("sim_eval", {"render_images": "true"})],
                 "world"),
    "hardware": ([("hardware", {"sim": "true"}), ("hardware", {"sim": "true", "teleop": "sim_leader"})], "world"),
    "so101_eval": ([("so101_eval", {"perception": "true"}),
                    ("so101_eval", {"perception": "true", "record": "/tmp/never_written_bag"})], "base_link"),
}
PERCEIVED = ("hardware", {"perception": "true"})  # the hardware layout on the arm: the same topics, base_link


def foxglove_topics(layout: dict) -> set[str]:
    """Every topic a Foxglove layout names: keys of a panel's `topics`, and every string that starts with '/' (an
    image topic, a message path such as /joint_states.position[0] or /graph_context/agentview.text)."""
    found = set()

    def walk(value, key=""):
        if isinstance(value, dict):
            for k, v in value.items():
                if k.startswith("/"):
                    found.add(k)
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and value.startswith("/"):
            found.add(re.split(r"[.\[{]", value, maxsplit=1)[0])

    walk(layout["configById"])
    return found


def panel_ids(tree) -> list[str]:
    return [tree] if isinstance(tree, str) else panel_ids(tree["first"]) + panel_ids(tree["second"])


def rviz_displays(config: dict) -> list[dict]:
    return config["Visualization Manager"]["Displays"]


def relative(topic: str) -> str:
    return topic if topic == "/clock" else topic.lstrip("/")


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_foxglove_layout_names_only_the_plans_topics(name):
    layout = json.loads((CONFIG_DIR / "foxglove" / f"{name}.json").read_text())
    assert sorted(panel_ids(layout["layout"])) == sorted(layout["configById"])  # every panel placed, none missing
    kinds = {panel.split("!")[0] for panel in layout["configById"]}
    assert {"3D", "Image", "RawMessages", "Plot"} <= kinds
    topics = foxglove_topics(layout)
    assert "/scene_graph/markers" in topics and "/joint_states" in topics
    assert any(t.endswith("/overlay") for t in topics) and any(t.endswith("/image_raw") for t in topics)
    variants, frame = VARIANTS[name]
    for launch, args in variants + ([PERCEIVED] if name == "hardware" else []):
        have = plan_topics(launch_plan(launch, args))
        missing = sorted(t for t in topics if relative(t) not in have)
        assert not missing, f"{name}.json names {missing}, which {launch} {args} has not; it has {sorted(have)}"
    scene = layout["configById"]["3D!scene_graph_markers"]
    assert scene["followTf"] == frame and scene["topics"] == {"/scene_graph/markers": {"visible": True}}
    raws = [p["topicPath"] for k, p in layout["configById"].items() if k.startswith("RawMessages")]
    assert any(t.startswith("/graph_context/") or t.startswith("/scene_graph/") for t in raws)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_rviz_config_names_only_the_plans_topics_with_matching_qos(name):
    config = yaml.safe_load((CONFIG_DIR / "rviz" / f"{name}.rviz").read_text())
    displays = rviz_displays(config)
    classes = [d["Class"] for d in displays]
    assert "rviz_default_plugins/MarkerArray" in classes and classes.count("rviz_default_plugins/Image") == 4
    assert "rviz_default_plugins/RobotModel" not in classes  # no launch publishes robot_description
    variants, frame = VARIANTS[name]
    assert config["Visualization Manager"]["Global Options"]["Fixed Frame"] == frame
    subscribed = [(d["Topic"]["Value"], d["Topic"]) for d in displays if "Topic" in d]
    assert ("/scene_graph/markers" in dict(subscribed)) and len(subscribed) == 5
    for launch, args in variants + ([PERCEIVED] if name == "hardware" else []):
        have = plan_topics(launch_plan(launch, args))
        for topic, qos in subscribed:
            assert relative(topic) in have, f"{name}.rviz names {topic}, which {launch} {args} has not"
            published = QOS[have[relative(topic)].qos]
            if qos["Reliability Policy"] == "Reliable":  # a reliable reader never matches a best-effort writer
                assert published.reliable, (name, topic)
            if qos["Durability Policy"] == "Transient Local":
                assert published.latched, (name, topic)


def test_plan_topics_follow_the_plans_nodes_and_parameters():
    """Overlays only where the scene_graph node draws them (images rendered), markers where a graph node runs."""
    quiet = plan_topics(launch_plan("sim_eval"))
    assert "scene_graph/markers" in quiet and "scene_graph/agentview/overlay" not in quiet
    assert "scene_graph/agentview/overlay" in plan_topics(launch_plan("sim_eval", {"render_images": "true"}))
    twin = plan_topics(launch_plan("so101_eval", {"sim": "true"}))
    assert "graph_context/wrist" in twin and "camera/wrist/image_raw" in twin and "/clock" in twin
    arm = plan_topics(launch_plan("hardware"))
    assert "scene_graph/markers" not in arm and "agentview/image_raw" in arm  # no graph node without perception
    assert "scene_graph/markers" not in plan_topics(launch_plan("so101_eval"))
