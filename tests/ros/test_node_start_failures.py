"""A node whose constructor fails half way (a camera that is not plugged in, an arm port that does not exist, a bad
parameter after the node acquired its simulator or threads) exits non-zero with its own error as one
`cannot start:` line, releases what it had acquired, and its destroy_node never raises (no AttributeError on top of
the real error, as the camera node had). Every node runs as its own process with real rclpy, loopback only."""

import re
import subprocess
import sys

import pytest
import yaml

from sgvla.paths import REPO_ROOT

from ..waiting import read_until

pytestmark = pytest.mark.ros

FATAL = re.compile(r"^\[FATAL\] \[[\d.]+\] \[(?P<node>[^\]]+)\]: cannot start: (?P<error>.*)$", re.M)
# What a destroy_node that trips over a half-built node leaves in the output.
CLEANUP_FAILURES = ("AttributeError", "destroy_node", "cleanup failed", "During handling of the above exception")


def start(module: str, env: dict, **params) -> subprocess.Popen:
    cmd = [sys.executable, "-m", f"sgvla_ros.{module}", "--ros-args"]
    for key, value in params.items():
        cmd += ["-p", f"{key}:={value}"]
    return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def outcomes(procs: dict[str, subprocess.Popen], timeout_s: float = 240) -> dict[str, tuple[int, str]]:
    """Every process's exit code and output (they run at once: they share the CPUs, not their waits)."""
    return {name: (proc.wait(timeout=timeout_s), proc.communicate()[0]) for name, proc in procs.items()}


def check_failed_start(name: str, code: int, out: str, error: str) -> None:
    assert code == 1, (name, code, out[-3000:])
    fatal = FATAL.findall(out)
    assert len(fatal) == 1 and re.search(error, fatal[0][1]), (name, error, out[-3000:])
    assert "Traceback" not in out, (name, out[-3000:])
    assert not [word for word in CLEANUP_FAILURES if word in out], (name, out[-3000:])


def test_hardware_nodes_without_their_devices_say_so_in_one_line(tmp_path, ros_env):
    rig = tmp_path / "rig.yaml"
    rig.write_text(yaml.safe_dump({
        "follower": {"port": str(tmp_path / "ttyACM_follower"), "id": "so101_follower"},
        "leader": {"port": str(tmp_path / "ttyACM_leader"), "id": "so101_leader"},
        "cameras": [{"name": "agentview", "source": "realsense", "device": "000000000000", "depth": True},
                    {"name": "wrist", "source": "opencv", "device": str(tmp_path / "video_wrist")}]}))
    procs = {"arm": start("so101_arm", ros_env, config=rig), "leader": start("so101_leader", ros_env, config=rig),
             "agentview": start("camera", ros_env, config=rig, camera="agentview"),
             "wrist": start("camera", ros_env, config=rig, camera="wrist")}
    results = outcomes(procs)
    check_failed_start("so101_arm", *results["arm"], rf"ArmError: follower port not found: {tmp_path}/ttyACM_follower")
    check_failed_start("so101_leader", *results["leader"],
                       rf"ArmError: leader port not found: {tmp_path}/ttyACM_leader")
    check_failed_start("agentview camera", *results["agentview"],
                       r"CameraError: camera agentview: cannot start RealSense 000000000000")
    check_failed_start("wrist camera", *results["wrist"],
                       rf"CameraError: camera wrist: cannot open video device '{tmp_path}/video_wrist'")


def run_cases(cases: dict, env: dict) -> None:
    """cases: node -> (module, parameters, the error its one line carries); all started at once."""
    procs = {name: start(module, env, **params) for name, (module, params, _) in cases.items()}
    results = outcomes(procs)
    for name, (_, _, error) in cases.items():
        check_failed_start(name, *results[name], error)


def test_nodes_that_acquire_things_release_them_after_failing_half_way(tmp_path, ros_env):
    """The twin fails once its simulator, arm, render thread, view and cameras run (a camera name that makes no
    topic name): released, or its process would not end; the simulator session on a rate checked after it; the
    recorders on a dataset folder that is a file and on a missing arm port."""
    rig = yaml.safe_load((REPO_ROOT / "config/hardware/twin.yaml").read_text())
    rig["cameras"] = [{"name": n, "source": "twin", "device": d, "width": 32, "height": 24, "fps": 5}
                      for n, d in (("agentview", "agentview"), ("wrist view", "wrist"))]
    twin_rig = tmp_path / "twin.yaml"
    twin_rig.write_text(yaml.safe_dump(rig))
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    run_cases({
        "so101_twin": ("so101_twin", {"config": twin_rig, "cameras": "[agentview, 'wrist view']"},
                       r"InvalidTopicNameException: .*'wrist view/image_raw'"),
        "sim_bridge": ("sim_bridge", {"preload": "['']", "lockstep": "false", "rate_hz": 0.0},
                       r"ValueError: sim_bridge: parameter rate_hz must be > 0, got 0.0"),
        "dataset_recorder": ("dataset_recorder", {"config": twin_rig, "root": a_file, "cameras": "[agentview]"},
                             rf"{a_file}"),
        "teleop_recorder": ("teleop_recorder", {"config": twin_rig, "root": tmp_path / "ds", "task": "t",
                                                "follower_port": tmp_path / "ttyACM_missing"},
                            r"ArmError: follower port not found"),
    }, {**ros_env, "MUJOCO_GL": "egl"})


def test_the_other_nodes_fail_on_bad_input_in_one_line(tmp_path, ros_env):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    (tmp_path / "bag").mkdir()
    run_cases({
        "keyboard_teleop": ("keyboard_teleop", {"rate_hz": 0.0},
                            r"ValueError: keyboard_teleop: parameter rate_hz must be > 0"),
        "bag_recorder": ("bag_recorder", {"output": tmp_path / "bag"}, r"FileExistsError: .*bag exists"),
        "graph_recorder": ("graph_recorder", {"output": a_file / "graphs.jsonl"}, r"NotADirectoryError"),
        "graph_publisher": ("graph_publisher", {"input": tmp_path / "missing.jsonl"},
                            r"FileNotFoundError: graph_publisher: input file not found"),
        "vlm_query": ("vlm_query", {}, r"ValueError: vlm_query: set the 'client' parameter"),
        "vla_policy": ("vla_policy", {"preload": "[sgvla.no_such_module]"},
                       r"ModuleNotFoundError: No module named 'sgvla.no_such_module'"),
        "scene_graph": ("scene_graph_node", {"ontology": "no_such_ontology"}, r"no_such_ontology"),
        "fiducial_graphs": ("fiducial_graphs", {"cameras": ["agentview", "nope"]},
                            r"ValueError: fiducial_graphs: camera\(s\) \['nope'\] are not in the rig so101"),
    }, ros_env)


def test_a_node_that_crashes_in_native_code_says_where(ros_env):
    """faulthandler (enabled by every node's runtime): a segmentation fault prints the Python stack of each thread,
    so a node that dies in a driver, DDS or a renderer leaves more than its exit code (-11) in the launcher's log."""
    import signal

    proc = start("scene_graph_node", ros_env)
    lines = read_until(proc, "ready", 120)
    proc.send_signal(signal.SIGSEGV)  # as a crash in native code raises it
    code, out = proc.wait(timeout=60), "".join(lines) + proc.communicate()[0]
    assert code == -signal.SIGSEGV, out[-3000:]
    assert "Fatal Python error: Segmentation fault" in out and "in run_node" in out, out[-3000:]


DESTROY_LEAVES_THE_GRAPH = r'''
import time
import rclpy
from rclpy.node import Node
from sgvla_ros.runtime import HardwareNode, StartFailed, build, destroy

class Unplugged(HardwareNode):
    def __init__(self):
        super().__init__("unplugged_device")

    def connect(self):
        raise OSError("no such device")

def seen(observer, name, want, timeout_s=20.0):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if (name in observer.get_node_names()) == want:
            return True
        time.sleep(0.1)
    return False

rclpy.init()
observer = Node("observer")
try:
    build(Unplugged)
except StartFailed as e:
    node = e.node
assert seen(observer, "unplugged_device", True), "the node never appeared"
destroy(node)
print("gone" if seen(observer, "unplugged_device", False) else "still in the graph", flush=True)
observer.destroy_node()
rclpy.shutdown()
'''


def test_a_destroyed_lifecycle_node_leaves_the_graph_at_once(ros_env):
    """rclpy's LifecycleNode.destroy_node leaves its state machine, which holds rcl's node: the node (in a one-node
    process its DDS participant) lived on until the interpreter's teardown collected it, and a camera node that could
    not open its device once died there with a segmentation fault. HardwareNode destroys the state machine too."""
    proc = subprocess.run([sys.executable, "-c", DESTROY_LEAVES_THE_GRAPH], env=ros_env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "gone", proc.stdout + proc.stderr[-3000:]
