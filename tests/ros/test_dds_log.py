"""`SGVLA_DDS_LOG`: Fast DDS's own warnings on request. The case they exist for: a participant that takes over the
shared-memory port of a killed one (the port's lock is free, its queue may be half used) resets it, and says so
only at warning level. Real rclpy participants, loopback only, on the test's own domain."""

import signal
import subprocess
import sys

import pytest

from sgvla_ros.dds_log import ENV, dds_log_level

from ..waiting import read_until

pytestmark = pytest.mark.ros

VICTIM = """
import rclpy, time
rclpy.init()
node = rclpy.create_node("victim")
print("up", flush=True)
time.sleep(120)
"""
SUCCESSOR = """
import rclpy, time
from sgvla_ros.dds_log import apply_dds_log_level
print("level:", apply_dds_log_level(), flush=True)
rclpy.init()
node = rclpy.create_node("successor")
end = time.monotonic() + 1.0
while time.monotonic() < end:
    rclpy.spin_once(node, timeout_sec=0.1)
node.destroy_node()
rclpy.shutdown()
"""


def after_a_killed_participant(env: dict) -> str:
    """The output of a participant started on the domain of one just killed (SIGKILL: nothing cleaned up)."""
    victim = subprocess.Popen([sys.executable, "-c", VICTIM], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        lines = read_until(victim, "up", 120)
        assert lines and lines[-1] == "up\n", "".join(lines)
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=30)
    out = subprocess.run([sys.executable, "-c", SUCCESSOR], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


def test_a_port_taken_over_from_a_killed_participant_is_reported_on_request(ros_env):
    quiet = after_a_killed_participant({k: v for k, v in ros_env.items() if k != ENV})
    assert "level: None" in quiet and "RTPS_TRANSPORT_SHM" not in quiet, quiet
    told = after_a_killed_participant({**ros_env, ENV: "warning"})
    assert "level: warning" in told, told
    assert "RTPS_TRANSPORT_SHM" in told and "Zombie. Reset the port" in told, told


def node_output(env: dict) -> subprocess.CompletedProcess:
    """A node that cannot start (graph_publisher without its input file), after it joined the domain."""
    return subprocess.run([sys.executable, "-m", "sgvla_ros.graph_publisher"], env=env, capture_output=True,
                          text=True, timeout=120)


def test_every_node_applies_the_level_at_start(ros_env):
    """runtime.init sets it before the node's participant exists: Fast DDS's warnings about that participant (QoS
    consistency of rmw's own topics) show, and the node's own error is still its one `cannot start:` line."""
    plain, told = node_output({k: v for k, v in ros_env.items() if k != ENV}), node_output({**ros_env, ENV: "warning"})
    for out in (plain, told):
        assert out.returncode == 1 and "cannot start: FileNotFoundError" in out.stderr, out.stderr[-3000:]
    assert "Warning]" not in plain.stdout + plain.stderr, plain.stderr[-3000:]
    assert "RTPS_QOS_CHECK" in told.stdout + told.stderr, told.stderr[-3000:]


def test_a_bad_level_stops_a_node_before_it_starts(ros_env):
    """Checked before anything joins the domain, with the valid values in the message (no silent default)."""
    with pytest.raises(ValueError, match=r"SGVLA_DDS_LOG='loud': expected one of debug, info, warning, error"):
        dds_log_level({ENV: "loud"})
    out = node_output({**ros_env, ENV: "loud"})
    assert out.returncode == 1, out.stdout + out.stderr
    assert "cannot start: SGVLA_DDS_LOG='loud'" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert "graph_publisher" not in out.stderr, out.stderr  # the node was never built
