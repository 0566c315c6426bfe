"""Equivalence: the same evaluation in process (`sgvla eval`'s Worker) and over topics (`sgvla launch sim_eval`,
real rclpy, loopback-only DDS, lock-step) gives the same episodes: success, steps, every action bit for bit,
the final end-effector position and the records. The launch also records every topic (MCAP), where the
graphs appear as text and overlay images, and, where root and tcpdump exist, runs inside the loopback
packet check."""

import json
import os
import shlex
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from sgvla.launch.plan import TOPICS
from sgvla.paths import REPO_ROOT

pytestmark = [pytest.mark.ros, pytest.mark.sim, pytest.mark.slow, pytest.mark.timeout(1800)]

SUITE = {"type": "libero_spatial", "render_profile": "fast", "image_size": 64}
PLAN = {"name": "equivalence", "suite": SUITE, "policies": [{"type": "expert"}], "tasks": [0, 1],
        "perturbations": "table7", "modes": ["standard", "scene_graph"], "episodes": 2, "max_steps": 40, "workers": 1}
# A short rendered episode for the recording (images, overlays), with a learned policy (a tiny random ACT: it
# reads the camera topics), in the single-process launch.
SHORT = {"name": "recording", "suite": SUITE, "tasks": [0], "perturbations": "table7", "modes": ["scene_graph"],
         "episodes": 1, "max_steps": 3, "workers": 1}
LOOPBACK = os.geteuid() == 0 and shutil.which("tcpdump") is not None and shutil.which("unshare") is not None


@pytest.fixture(scope="module")
def runs(tmp_path_factory, sim_eval):
    """Three runs at once (they share the CPUs, not their waits): the plan in process; the plan over topics
    (processes, recorded, inside the loopback check where possible); a short rendered episode over topics
    (one process, a tiny learned policy that reads the camera topics, recorded with images and overlays)."""
    tmp = tmp_path_factory.mktemp("equivalence")
    config, short = tmp / "plan.yaml", tmp / "short.yaml"
    config.write_text(yaml.safe_dump({**PLAN, "output_dir": str(tmp / "inprocess")}))
    short.write_text(yaml.safe_dump({**SHORT, "output_dir": str(tmp / "short"),
                                     "policies": [{"type": "act", "path": str(tmp / "tiny_act")}]}))
    env = {**os.environ, "MUJOCO_GL": "egl", "HF_HUB_OFFLINE": "1"}
    launch = [sys.executable, "-m", "sgvla.cli", "launch", "sim_eval"]
    d1, d2 = sim_eval.domain_ids(2)
    prefix = [str(REPO_ROOT / "scripts" / "check_loopback.sh")] if LOOPBACK else []
    build_act = [sys.executable, "-m", "sgvla.cli", "make-tiny-policy", "act", str(tmp / "tiny_act")]
    short_launch = [*launch, f"eval_config={short}", "--record", str(tmp / "short_bag"), "--single-process",
                    "--domain-id", str(d2)]
    t0 = time.monotonic()
    logs = sim_eval.run_together({
        "topics": [*prefix, *launch, f"eval_config={config}", f"output_dir={tmp / 'topics'}", "render_images=false",
                   "--record", str(tmp / "bag"), "--domain-id", str(d1)],
        "short": ["bash", "-c", f"{shlex.join(build_act)} && {shlex.join(short_launch)}"],
        "inprocess": [sys.executable, str(REPO_ROOT / "tests/ros/inprocess_episodes.py"), str(config),
                      str(tmp / "inprocess.npz")],
    }, env, timeout_s=900)
    print(f"three runs: {time.monotonic() - t0:.0f} s")
    return tmp, np.load(tmp / "inprocess.npz"), logs


def test_topics_and_in_process_give_identical_episodes(runs, sim_eval):
    tmp, inproc, _ = runs
    expected = json.loads(str(inproc["records"]))
    got = [json.loads(line) for line in (tmp / "topics" / "episodes.jsonl").read_text().splitlines()]
    assert len(expected) == 8 and len(got) == 8
    bag = sim_eval.bag_messages(tmp / "bag")
    sim_eval.assert_same_episodes(expected, got, inproc, bag)
    finals = {m.episode: m for m in bag["/sim/status"] if m.done}
    scenes = {(m.episode, m.step): m for m in bag["/sim/scene"]}
    for i, have in enumerate(got):
        episode = i + 1  # the evaluator numbers the plan's episodes from 1
        assert have["steps"] == 40
        eef = scenes[episode, finals[episode].step].eef_position
        assert np.asarray(eef, np.float64).tobytes() == inproc[f"eef_{i}"].tobytes()
    # The two modes of one seed ran the same actions here (the expert ignores the prompt) but their
    # prompts differ: the graph context reached the policy in the scene_graph mode only.
    assert got[1]["triplets_in_prompt"] > 0 and got[0]["triplets_in_prompt"] == 0


def test_recording_shows_graphs_as_text_and_overlays(runs, sim_eval):
    tmp, _, _ = runs
    mcaps = list((tmp / "short_bag").glob("*.mcap"))
    assert len(mcaps) == 1 and mcaps[0].stat().st_size > 0
    bag = sim_eval.bag_messages(tmp / "short_bag")
    for topic in ["/clock", "/sim/status", "/sim/scene", "/action", "/joint_states", "/eef_pose", "/objects", "/task",
                  "/prompt", "/eval/result", "/scene_graph/agentview",
                  "/graph_context/agentview", "/camera/agentview/image_raw", "/camera/agentview/camera_info",
                  "/camera/robot0_eye_in_hand/image_raw", "/scene_graph/agentview/overlay"]:
        assert bag[topic], f"nothing recorded on {topic}"
    assert len(bag["/action"]) == 3 and len(bag["/sim/status"]) == 4 and len(bag["/eval/result"]) == 1
    assert len(bag["/camera/agentview/image_raw"]) == 4  # every step's frame, on which the policy acted
    assert {m.source for m in bag["/scene_graph/agentview"]} == {m.source for m in bag["/sim/scene"]} == {
        "ground_truth"}  # the simulator's state and its graphs
    context = bag["/graph_context/agentview"][0]
    assert "Scene graph:" in context.text and len(context.graph.triplets) > 0
    assert "Current simulator semantic context" in bag["/prompt"][0].prompt
    image, overlay = bag["/camera/agentview/image_raw"][0], bag["/scene_graph/agentview/overlay"][0]
    assert image.header.frame_id == "agentview_optical_frame" and (image.width, image.height) == (64, 64)
    assert overlay.encoding == "rgb8" and overlay.height >= 384 and overlay.width > overlay.height
    info = bag["/camera/agentview/camera_info"][0]
    assert info.k[2] == 32 and info.k[5] == 32 and info.width == 64
    record = json.loads((tmp / "short" / "episodes.jsonl").read_text())
    assert record["steps"] == 3 and record["triplets_in_prompt"] > 0


def test_plan_run_recorded_every_step(runs, sim_eval):
    tmp, _, _ = runs
    bag = sim_eval.bag_messages(tmp / "bag")
    assert len(bag["/eval/result"]) == 8 and len(bag["/action"]) == 8 * 40
    assert len([m for m in bag["/sim/status"] if m.done]) == 8
    assert not bag["/camera/agentview/image_raw"]  # the expert needs no images: none rendered, as in process


def test_running_graph_matches_the_topic_table(runs):
    tmp, _, _ = runs
    plan = json.loads((tmp / "topics" / "ros_graph.json").read_text())["topics"]  # no images rendered
    short = json.loads((tmp / "short" / "ros_graph.json").read_text())["topics"]  # images and overlays
    for t in TOPICS:
        if t.qos in ("service", "action"):
            continue
        for camera in ("agentview", "robot0_eye_in_hand") if "{camera}" in t.name else (None,):
            name = t.name.format(camera=camera)
            name = name if name.startswith("/") else "/" + name
            graph = short if "image_raw" in name or "overlay" in name else plan
            assert name in graph, name
            assert graph[name]["types"] == [t.type], name
            pubs = {e["node"] for e in graph[name]["publishers"]}
            subs = {e["node"] for e in graph[name]["subscribers"]}
            assert set(t.publishers) <= pubs <= set(t.publishers) | {"bag_recorder"}, (name, pubs)
            expected = set(t.subscribers)
            if name.startswith("/graph_context/") and camera != "agentview":
                expected.discard("vla_policy")  # the policy reads the graph of the plan's view only
            assert expected <= subs, (name, expected, subs)
            if t.qos in ("control", "latched", "frames"):
                assert all(e["durability"] == "transient_local" for e in graph[name]["publishers"]), name
            if t.qos == "sensor":
                assert all(e["reliability"] == "best_effort" for e in graph[name]["publishers"]), name


def test_the_launch_prints_the_summary_not_the_wide_table(runs):
    """The evaluator ends with `sgvla eval`'s summary (at most 100 columns, the report's path last); the wide per-task
    table is in table.md only."""
    tmp, _, logs = runs
    lines = logs["topics"].splitlines()
    report = f"report: {tmp / 'topics' / 'report.html'}"
    first = "expert: 4 matched block(s), all tasks pooled"
    assert first in lines and report in lines, logs["topics"][-3000:]
    summary = [line for line in lines[lines.index(first):lines.index(report)] if not line.startswith("[")]
    assert max(len(line) for line in summary) <= 100, summary  # (a node's stderr, `[node] ...`, may come between)
    assert not [line for line in lines if line.startswith("| ")] and "| all |" in (tmp / "topics/table.md").read_text()


@pytest.mark.skipif(not LOOPBACK, reason="the loopback check needs root, unshare and tcpdump (CI has them)")
def test_launch_sends_nothing_off_loopback(runs):
    _, _, logs = runs
    assert ", 0 not on 127/8" in logs["topics"], logs["topics"][-3000:]


DECODE = """
import sys
from importlib.abc import MetaPathFinder


class NoSgvla(MetaPathFinder):  # prove the decoding needs nothing of sgvla
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("sgvla", "sgvla_ros", "sgvla_interfaces"):
            raise ImportError(f"decoding must not import {name}")


sys.meta_path.insert(0, NoSgvla())
from pathlib import Path

from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

bag, msg_dir = Path(sys.argv[1]), Path(sys.argv[2])
store = get_typestore(Stores.ROS2_KILTED)
types = {}
for path in sorted(msg_dir.glob("*.msg")):
    types.update(get_types_from_msg(path.read_text(), f"sgvla_interfaces/msg/{path.stem}"))
store.register(types)
counts = {}
with Reader(bag) as reader:
    for conn, _, raw in reader.messages():
        store.deserialize_cdr(raw, conn.msgtype)
        counts[conn.topic] = counts.get(conn.topic, 0) + 1
print(sum(counts.values()), len(counts), sorted(counts))
"""


@pytest.mark.parametrize("bag", ["bag", "short_bag"])
def test_every_recorded_message_decodes_from_the_msg_files_alone(runs, bag):
    """No opaque payload: a reader with rosbags and sgvla_interfaces' .msg files (no sgvla) decodes every message."""
    tmp, _, _ = runs
    proc = subprocess.run([sys.executable, "-I", "-c", DECODE, str(tmp / bag),
                           str(REPO_ROOT / "ros2_ws/src/sgvla_interfaces/msg")], capture_output=True, text=True,
                          timeout=300, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    total, topics, names = proc.stdout.split(" ", 2)
    assert int(total) > 50 and "/sim/scene" in names and "/eval/result" in names, proc.stdout
