"""`sgvla launch --domain-id N` looks at domain N before it starts a node: with another launch there, it refuses
(exit 2) and names what it found (ROS nodes from a discovery probe, processes holding the domain's ports), and the
launch already there runs on undisturbed. Two launches on one domain used to take each other's messages."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml

from sgvla.paths import REPO_ROOT
from sgvla.launch.ros_domain import domain_users, free_domain_id
from sgvla.core.ros_env import loopback_env

pytestmark = [pytest.mark.ros, pytest.mark.sim]

COUNT_JOINT_STATES = """
import rclpy, time
from sensor_msgs.msg import JointState
from sgvla_ros.qos import QOS
rclpy.init()
node = rclpy.create_node("observer")
seen = []
node.create_subscription(JointState, "joint_states", seen.append, QOS["sensor"])
deadline = time.monotonic() + 60
while len(seen) < 30 and time.monotonic() < deadline:
    rclpy.spin_once(node, timeout_sec=0.1)
print(len(seen))
"""


def tiny_twin_rig(tmp_path) -> str:
    rig = yaml.safe_load((REPO_ROOT / "config/hardware/twin.yaml").read_text())
    rig["cameras"] = [{"name": n, "source": "twin", "device": n, "width": 32, "height": 24, "fps": 5}
                      for n in ("agentview", "wrist")]
    path = tmp_path / "twin.yaml"
    path.write_text(yaml.safe_dump(rig))
    return str(path)


@pytest.fixture
def free_domain() -> tuple[int, dict]:
    """A domain nothing on this machine uses now, and its loopback-only environment (the tests' fixed ids may be
    taken by a concurrent test session, which this check would rightly refuse)."""
    domain_id = free_domain_id()
    return domain_id, loopback_env(domain_id)


def test_a_second_launch_on_a_busy_domain_refuses_and_the_first_runs_on(tmp_path, free_domain):
    ros_domain_id, ros_env = free_domain
    launch = [sys.executable, "-m", "sgvla.cli", "launch", "hardware", "sim=true",
              f"config={tiny_twin_rig(tmp_path)}", "--domain-id", str(ros_domain_id)]
    log = tmp_path / "first.log"
    first = subprocess.Popen(launch, env=ros_env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while "twin task" not in log.read_text():  # the twin node is up (its first log line)
            assert first.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        twin_pid = re.search(r"so101_twin \[(\d+)\]", log.read_text())[1]

        second = subprocess.run(launch, env=ros_env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stdout + second.stderr
        refusal = second.stderr
        assert f"ROS domain {ros_domain_id} is in use on this machine" in refusal, refusal
        assert "/so101_twin" in refusal and f"{twin_pid} (python -m sgvla_ros.so101_twin" in refusal, refusal
        assert "Omit --domain-id" in refusal, refusal
        assert "nodes on ROS_DOMAIN_ID" not in second.stdout, second.stdout  # it started no node

        # The first launch runs on: its twin still publishes joint states, and it stops cleanly on Ctrl-C.
        watched = subprocess.run([sys.executable, "-c", COUNT_JOINT_STATES], env=ros_env, capture_output=True,
                                 text=True, timeout=120)
        assert watched.returncode == 0 and int(watched.stdout.split()[-1]) >= 30, watched.stdout + watched.stderr
        assert first.poll() is None, log.read_text()[-3000:]
        os.killpg(first.pid, signal.SIGINT)
        code = first.wait(timeout=60)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    text = log.read_text()
    assert code == 130 and "so101_twin exited with 130" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]


def test_an_empty_domain_is_empty_and_sharing_needs_a_chosen_domain(free_domain):
    ros_domain_id, ros_env = free_domain
    users = domain_users(ros_domain_id)
    assert users.empty and not users.probe_error and users.describe() == "nobody", users
    out = subprocess.run([sys.executable, "-m", "sgvla.cli", "launch", "sim_eval", "--share-domain"], env=ros_env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--share-domain goes with --domain-id" in out.stderr, out.stderr
