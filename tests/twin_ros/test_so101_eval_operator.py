"""`sgvla launch so101_eval` on the simulated Feetech buses: the operator's protocol over topics, killed and resumed.

A scripted operator (a ROS process of its own, as `ros2 topic pub` would be) reads eval/operator and answers on
eval/confirm and eval/verdict, once by typing into the launch's terminal (a pseudo-terminal) instead: it confirms
each scene, stops one episode early, marks one invalid (the evaluator runs it again at once), and withholds the
verdict of a later one; the test then SIGKILLs the whole launch (every
node at once, as a power cut would) and launches the same plan again. The records must hold every episode of the
plan exactly once, with the verdicts the operator gave, the home pose reached at bounded speed before each, and
each episode with a verdict saved whole as an episode of the run's rollouts dataset (the killed one not).
"""

import json
import os
import pty
import signal
import subprocess
import sys

import pytest
import yaml
from lerobot.datasets.lerobot_dataset import LeRobotDataset

import sgvla.plugins  # noqa: F401
from sgvla.core.config import load_config
from sgvla.core.episode import EpisodeKey
from sgvla.eval.config import EvalConfig
from sgvla.eval.runner import plan
from sgvla.so101.hardware.rollouts import rollout_index

from .conftest import rig_file
from ..waiting import wait_until

pytestmark = pytest.mark.ros

OPERATOR = """
import json, os, sys, rclpy
from std_msgs.msg import String
from sgvla_ros.qos import QOS
script = json.loads(sys.argv[1])  # per scene: {"stop": bool, "verdict": text or null (withheld), "keyboard": bool}
terminal = int(sys.argv[2])  # the launch's terminal (a pty's master side)
rclpy.init()
node = rclpy.create_node("operator")
pubs = {t: node.create_publisher(String, f"eval/{t}", QOS["reliable"]) for t in ("confirm", "verdict")}
pending, current = [], {}
def send():  # once arm_policy's subscription is matched: a volatile message sent before would be lost
    while pending and pubs[pending[0][0]].get_subscription_count() > 0:
        topic, text = pending.pop(0)
        pubs[topic].publish(String(data=text))
        print(f"SENT {topic} {text}", flush=True)
def type_line(text):
    os.write(terminal, (text + "\\n").encode())
    print(f"TYPED {text!r}", flush=True)
def on_line(msg):
    print(msg.data, flush=True)
    word = msg.data.split()[0]
    if word == "confirm":
        current.clear()
        current.update(script.pop(0))
        if current.get("keyboard"):
            type_line("")  # Enter: the scene is set
        else:
            pending.append(("confirm", "start"))
    elif word == "running" and current.get("stop"):
        pending.append(("confirm", "stop"))
    elif word == "verdict":
        if current["verdict"] is None:
            print("WITHHELD", flush=True)
        elif current.get("keyboard"):
            type_line(current["verdict"])
        else:
            pending.append(("verdict", current["verdict"]))
    send()
node.create_subscription(String, "eval/operator", on_line, QOS["latched"])
node.create_timer(0.02, send)
try:
    rclpy.spin(node)
except KeyboardInterrupt:  # the test's Ctrl-C: the end
    pass
"""

SCRIPT = [  # the plan's four episodes, in order: one invalid and redone, one killed while its verdict is awaited
    {"stop": False, "verdict": "success placed it", "keyboard": True},
    {"stop": False, "verdict": "invalid the bowl was not where the card says"},
    {"stop": True, "verdict": "failure stopped: drifting off the table"},  # the redo of the invalid one
    {"stop": False, "verdict": None},  # the launch is killed while this verdict is awaited: no record
    {"stop": False, "verdict": "success after the restart"},  # the resumed run: that episode again
    {"stop": False, "verdict": "failure missed the stove"},
]


def test_operator_protocol_over_topics_killed_and_resumed(tmp_path, calibration_dir, sim_buses, ros_env,
                                                          ros_domain_id):
    arm = {"id": "so101_follower", "calibration_dir": str(calibration_dir)}
    rig = rig_file(tmp_path, "synthetic", follower={**arm, "port": sim_buses.follower},
                   leader={**arm, "id": "so101_leader", "port": sim_buses.leader})
    suite = {"type": "so101_hardware", "episode_time_s": 2.0, "control_rate_hz": 30.0, "home_step_deg": 3.0,
             "home_tolerance_deg": 3.0, "home_timeout_s": 30.0, "verdict_window_s": 0.5,
             "home": {"shoulder_pan": 0.0, "shoulder_lift": 0.0, "elbow_flex": 0.0, "wrist_flex": 0.0,
                      "wrist_roll": 0.0, "gripper": 10.0}}
    plan_file = tmp_path / "so101_hardware.yaml"
    out = tmp_path / "run"
    plan_file.write_text(yaml.safe_dump({
        "name": "operator_test", "suite": suite, "policies": [{"type": "hold", "pan_step_deg": 0.5}],
        "tasks": [0, 1], "perturbations": "none", "modes": ["standard"], "order": "counterbalanced",
        "episodes": 2, "output_dir": str(out)}))
    keys = plan(load_config(EvalConfig, plan_file, {}))
    assert len(keys) == 4

    logs = {name: tmp_path / f"{name}.log" for name in ("operator", "launch1", "launch2")}
    master, terminal = pty.openpty()  # the terminal `sgvla launch` runs in: the nodes' stdin
    operator = subprocess.Popen([sys.executable, "-c", OPERATOR, json.dumps(SCRIPT), str(master)], env=ros_env,
                                stdout=logs["operator"].open("w"), stderr=subprocess.STDOUT, pass_fds=(master,))
    command = [sys.executable, "-m", "sgvla.cli", "launch", "so101_eval", f"config={rig}", "cameras=false",
               f"eval_config={plan_file}", "--domain-id", str(ros_domain_id), "--share-domain"]
    try:
        killed_tmp = tmp_path / "launch1_tmp"  # the killed launch cannot remove its temp folder: the test's own
        killed_tmp.mkdir()
        first = subprocess.Popen(command, env={**ros_env, "TMPDIR": str(killed_tmp)}, stdin=terminal,
                                 stdout=logs["launch1"].open("w"), stderr=subprocess.STDOUT,
                                 start_new_session=True)  # its own process group: the test kills all of it at once
        try:
            wait_until(lambda: "WITHHELD" in logs["operator"].read_text(), 150, "the fourth scene's verdict request",
                       logs=logs.values(), procs=(operator, first))
        finally:
            os.killpg(first.pid, signal.SIGKILL)  # every node of the launch, mid-episode
            first.wait(timeout=30)
        seen = logs["operator"].read_text()
        assert seen.count("SENT verdict") == 2 and seen.count("SENT confirm start") == 3, seen
        assert seen.count("TYPED") == 2, seen
        lines = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
        assert [EpisodeKey.of(r) for r in lines] == keys[:2]  # the invalid one redone before the next

        second = subprocess.run(command, env=ros_env, stdin=subprocess.DEVNULL, stdout=logs["launch2"].open("w"),
                                stderr=subprocess.STDOUT, timeout=180)
        log2 = logs["launch2"].read_text()
        assert second.returncode == 0, log2[-4000:]
        assert "2 of 4 episodes to run" in log2, log2[-4000:]
    finally:
        operator.send_signal(signal.SIGINT)
        try:
            operator.wait(timeout=20)
        except subprocess.TimeoutExpired:
            operator.kill()
            operator.wait()
        os.close(master)
        os.close(terminal)

    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [EpisodeKey.of(r) for r in records] == keys  # every episode once, in the plan's order, none lost
    verdicts = [(r["verdict"], r["operator_note"], r["success"]) for r in records]
    assert verdicts == [("success", "placed it", True), ("failure", "stopped: drifting off the table", False),
                        ("success", "after the restart", True), ("failure", "missed the stove", False)]
    assert [r["verdict_source"] for r in records] == ["keyboard", "topic", "topic", "topic"]
    for r in records:
        assert r["home_error_deg"] <= 3.0
        assert r["max_steps"] == 60 and r["task"] and r["prompt"] == r["task"]
        assert all(r[f"{phase}_s"] >= 0 for phase in ("home", "confirm_wait", "run", "verdict_wait"))
        # Bounded speed: at most home_step_deg per tick at 30 Hz, so homing took at least this long.
        assert r["home_s"] >= (r["home_start_error_deg"] - 3.0) / (3.0 * 30.0) * 0.9, r
    assert records[1]["stopped_by"] == "operator" and records[1]["steps"] < 60
    assert [r["stopped_by"] for r in records if r is not records[1]] == ["time limit"] * 3
    assert all(r["steps"] == 60 for r in records if r is not records[1])
    assert records[2]["home_start_error_deg"] > 10.0  # the hold policy had turned the base 0.5 deg per step
    invalid = [json.loads(line) for line in (out / "infra_failures.jsonl").read_text().splitlines()]
    assert [(EpisodeKey.of(r), r["kind"], r["operator_note"]) for r in invalid] == [
        (keys[1], "invalid", "the bowl was not where the card says")]
    assert "success" in (out / "table.md").read_text()  # the report, as `sgvla eval` writes it
    # Every episode with a verdict is a rollout in the run folder's LeRobot dataset (joints only: no cameras here),
    # the invalid one kept and marked; the episode killed while its verdict was awaited left nothing.
    assert [r["rollout_episode"] for r in records] == [0, 2, 3, 4] and invalid[0]["rollout_episode"] == 1
    assert all(r["rollout_dataset"] == str(out / "rollouts") and r["rollout_frames"] == r["steps"] for r in records)
    index = rollout_index(out / "rollouts")
    assert [(e["episode_index"], e["verdict"], e["valid"]) for e in index] == [
        (0, "success", True), (1, "invalid", False), (2, "failure", True), (3, "success", True), (4, "failure", True)]
    dataset = LeRobotDataset("local/so101_eval_rollouts", root=out / "rollouts")
    assert dataset.meta.total_episodes == 5
    assert dataset.meta.total_frames == sum(r["steps"] for r in records) + invalid[0]["rollout_frames"]
