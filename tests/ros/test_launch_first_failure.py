"""`sgvla launch hardware` on a rig whose devices are missing: the launch names the node that failed first and
quotes that node's own error, before it stops the others and again in its last line; no node adds a traceback of
its cleanup (the camera node used to add `AttributeError: 'CameraNode' object has no attribute 'camera'`)."""

import re
import subprocess
import sys

import pytest
import yaml

pytestmark = pytest.mark.ros


@pytest.fixture
def missing_devices_rig(tmp_path) -> str:
    path = tmp_path / "rig.yaml"
    path.write_text(yaml.safe_dump({
        "follower": {"port": str(tmp_path / "ttyACM_follower"), "id": "so101_follower"},
        "cameras": [{"name": "agentview", "source": "opencv", "device": str(tmp_path / "video_agentview")},
                    {"name": "wrist", "source": "synthetic", "width": 32, "height": 24, "fps": 10}]}))
    return str(path)


def launch(args: list[str], env: dict, domain_id: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sgvla.cli", "launch", "hardware", *args,
                           "--domain-id", str(domain_id)], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=240)


def test_the_launch_names_the_node_that_failed_first_and_quotes_it(missing_devices_rig, ros_env, ros_domain_id):
    proc = launch([f"config={missing_devices_rig}"], ros_env, ros_domain_id)
    out = proc.stdout + proc.stderr  # the launch's lines, then the nodes' (their stderr, passed on)
    first = re.search(r"^sgvla launch: (\S+) exited first \(exit 1\): (.+); stopping the launch$", out, re.M)
    assert first, out[-4000:]
    node, error = first[1], first[2]
    # Either failing node may be first (the camera usually: the arm node imports torch); the other is then stopped.
    expected = {"agentview_camera": "cannot start: CameraError: camera agentview: cannot open video device",
                "so101_arm": "cannot start: ArmError: follower port not found"}
    assert node in expected and error.startswith(expected[node]), out[-4000:]
    # The quote is the node's own line, which reached the terminal prefixed by its name.
    assert re.search(rf"^\[{node}\] \[FATAL\] \[[\d.]+\] \[{node}\]: {re.escape(error)}$", out, re.M), out[-4000:]
    code = 1 if node == "so101_arm" else 3  # the main node's code, or 3 when another node failed first
    assert proc.returncode == code, out[-4000:]
    assert proc.stdout.rstrip().splitlines()[-1] == f"sgvla launch hardware: {node} exited first (exit 1): {error}; " \
                                            f"the launch exits with {code}", out[-4000:]
    assert "AttributeError" not in out and "Traceback" not in out, out[-4000:]


def test_single_process_launch_quotes_the_failed_node(missing_devices_rig, ros_env, ros_domain_id):
    proc = launch([f"config={missing_devices_rig}", "--single-process"], ros_env, ros_domain_id)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]
    last = proc.stdout.rstrip().splitlines()[-1]
    assert last.startswith("sgvla launch hardware: the nodes' process ended (exit 1): cannot start: ArmError: "
                           "follower port not found"), out[-4000:]
    assert "AttributeError" not in out and "Traceback" not in out, out[-4000:]
