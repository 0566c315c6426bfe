"""`sgvla launch --domain-id N` looks at domain N before it starts a node: with another launch there, it refuses
(exit 2) and names what it found (ROS nodes from a discovery probe, processes holding the domain's ports), and the
launch already there runs on undisturbed. Two launches on one domain used to take each other's messages.
Domains chosen at the same moment (nobody there yet) are kept apart by leases: a domain an sgvla process holds is
refused by name and never handed out as free, and its lease ends with the process."""

import os
import re
import signal
import subprocess
import sys

import pytest
import yaml

from sgvla.core.ros_env import loopback_env
from sgvla.launch.ros_domain import DomainLease, domain_users, lease_free_domain
from sgvla.paths import REPO_ROOT

from ..waiting import wait_until

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


def test_a_second_launch_on_a_busy_domain_refuses_and_the_first_runs_on(tmp_path, ros_domain_id, ros_env):
    launch = [sys.executable, "-m", "sgvla.cli", "launch", "hardware", "sim=true",
              f"config={tiny_twin_rig(tmp_path)}", "--domain-id", str(ros_domain_id)]
    log = tmp_path / "first.log"
    first = subprocess.Popen(launch, env=ros_env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        wait_until(lambda: "twin task" in log.read_text(), 180, "the twin node's first line", logs=[log],
                   procs=[first])
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


def test_an_empty_domain_is_empty_and_sharing_needs_a_chosen_domain(ros_domain_id, ros_env):
    users = domain_users(ros_domain_id)
    assert users.empty and not users.probe_error and users.describe() == "nobody", users
    out = subprocess.run([sys.executable, "-m", "sgvla.cli", "launch", "sim_eval", "--share-domain"], env=ros_env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--share-domain goes with --domain-id" in out.stderr, out.stderr


HOLD_LEASE = """
import sys, time
from sgvla.launch.ros_domain import DomainLease, lease_free_domain
lease = lease_free_domain() if sys.argv[1] == "free" else DomainLease(int(sys.argv[1]))
print(f"acquired {lease.domain_id}" if lease.acquired else "refused", flush=True)
time.sleep(600)
"""


def test_a_leased_domain_is_refused_by_name_never_handed_out_and_freed_with_its_holder(ros_domain_id):
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LEASE, str(ros_domain_id)], stdout=subprocess.PIPE,
                              text=True)
    try:
        # the test holds this domain's lease, so a process of its own cannot take it ...
        assert holder.stdout.readline().strip() == "refused"
        holder.kill()
        holder.wait()
        with DomainLease(ros_domain_id) as mine:
            assert not mine.acquired and f"pid {os.getpid()}" in mine.holder, mine.holder
        # ... and a launch on it without the test's word (LEASED_ENV) refuses before any look or node, by name
        out = subprocess.run([sys.executable, "-m", "sgvla.cli", "launch", "sim_eval", "--domain-id",
                              str(ros_domain_id)], env=loopback_env(ros_domain_id), capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 2, out.stdout + out.stderr
        assert f"ROS domain {ros_domain_id} is taken by pid {os.getpid()}" in out.stderr, out.stderr
        assert "nodes on ROS_DOMAIN_ID" not in out.stdout, out.stdout
        # a free domain is never a leased one
        taken = [lease_free_domain() for _ in range(20)]
        try:
            assert ros_domain_id not in {x.domain_id for x in taken}
            assert len({x.domain_id for x in taken}) == 20
        finally:
            for x in taken:
                x.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_a_lease_ends_with_its_process():
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LEASE, "free"], stdout=subprocess.PIPE, text=True)
    try:
        domain_id = int(holder.stdout.readline().split()[-1])
        with DomainLease(domain_id) as lease:
            assert not lease.acquired and f"pid {holder.pid}" in lease.holder, lease.holder
        holder.kill()  # SIGKILL: no cleanup of its own runs
        holder.wait()
        with DomainLease(domain_id) as lease:
            assert lease.acquired
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
