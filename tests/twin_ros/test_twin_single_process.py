"""`sgvla launch hardware sim=true teleop=leader --single-process`: the twin and the leader node in one
process; the twin's joint_states arrive and follow the (simulated) leader; Ctrl-C on the terminal (SIGINT to the
whole process group, then the launcher's own) stops it cleanly."""

import json
import os
import signal
import subprocess
import sys

import pytest

from .conftest import rig_file
from ..waiting import wait_until

pytestmark = [pytest.mark.ros, pytest.mark.sim]

WATCH = """
import json, time, rclpy
from sensor_msgs.msg import JointState
from sgvla_ros.qos import QOS
rclpy.init()
node = rclpy.create_node("watcher")
seen = {"joint_states": [], "leader/joint_states": []}
for topic in seen:
    node.create_subscription(JointState, topic, lambda m, t=topic: seen[t].append(list(m.position)), QOS["sensor"])
deadline = time.monotonic() + 120
while min(map(len, seen.values())) < 60 and time.monotonic() < deadline:
    rclpy.spin_once(node, timeout_sec=0.1)
print(json.dumps({t: [max(c) - min(c) for c in zip(*v)] for t, v in seen.items() if v}))
"""


def test_single_process_twin_launch_runs_and_stops_on_ctrl_c(tmp_path, calibration_dir, sim_buses, ros_env,
                                                             ros_domain_id):
    cameras = [{"name": n, "source": "twin", "device": n, "width": 32, "height": 24, "fps": 5}
               for n in ("agentview", "wrist")]
    rig = rig_file(tmp_path, "twin", cameras=cameras, leader={"port": sim_buses.leader, "id": "so101_leader",
                                                              "calibration_dir": str(calibration_dir)})
    log = tmp_path / "launch.log"
    launch = subprocess.Popen([sys.executable, "-m", "sgvla.cli", "launch", "hardware", "sim=true", "teleop=leader",
                               f"config={rig}", "--single-process", "--domain-id", str(ros_domain_id)],
                              env=ros_env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # The watcher joins the domain once the launch has checked that nothing else is on it (--domain-id).
        wait_until(lambda: "nodes in one process" in log.read_text(), 60, "the launch", logs=[log], procs=[launch])
        watched = subprocess.run([sys.executable, "-c", WATCH], env=ros_env, capture_output=True, text=True,
                                 timeout=180)
        os.killpg(launch.pid, signal.SIGINT)  # Ctrl-C in the launch's terminal
        code = launch.wait(timeout=60)
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)
            launch.wait()
    text = log.read_text()
    assert watched.returncode == 0, watched.stderr[-3000:] + text[-3000:]
    spans = json.loads(watched.stdout)
    assert set(spans) == {"joint_states", "leader/joint_states"}, (spans, text[-3000:])
    # 2 s of the leader's slow swing: the twin's body joints move with it (radians)
    assert min(spans["leader/joint_states"][:5]) > 0.02 and min(spans["joint_states"][:5]) > 0.01, spans
    assert "2 nodes in one process" in text and code == 130 and "exited with 130" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
