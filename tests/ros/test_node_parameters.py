"""Node parameters as `ros2 param` sees them: each described (its comment in config/ros/*.yaml), typed, read-only
where a change needs a restart (a `set` is refused with the reason, never silently ignored), and taken at once
where the node reads it each time (a bad value refused with the reason). A real vla_policy node, asked over its
parameter services by a second process, on a loopback-only domain."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ros

PROBE = r"""
import json, sys
import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rcl_interfaces.srv import DescribeParameters, GetParameters, SetParameters

rclpy.init()
node = Node("parameter_probe")

def call(kind, service, request):
    client = node.create_client(kind, f"/vla_policy/{service}")
    assert client.wait_for_service(timeout_sec=60), service
    future = client.call_async(request)
    rclpy.spin_until_future_complete(node, future, timeout_sec=30)
    return future.result()

names = ["lockstep", "cameras", "step_timeout_s", "reset_timeout_s"]
described = call(DescribeParameters, "describe_parameters", DescribeParameters.Request(names=names)).descriptors
out = {"descriptors": {d.name: {"description": d.description, "read_only": d.read_only, "type": d.type}
                       for d in described}}
sets = {"lockstep": Parameter("lockstep", value=False), "step_timeout_s": Parameter("step_timeout_s", value=7.5),
        "reset_timeout_s": Parameter("reset_timeout_s", value=-1.0), "wrong_type": Parameter("step_timeout_s", value="x")}
out["set"] = {}
for label, parameter in sets.items():
    result = call(SetParameters, "set_parameters", SetParameters.Request(parameters=[parameter.to_parameter_msg()]))
    out["set"][label] = {"successful": result.results[0].successful, "reason": result.results[0].reason}
values = call(GetParameters, "get_parameters", GetParameters.Request(names=names)).values
out["values"] = {"lockstep": values[0].bool_value, "step_timeout_s": values[2].double_value,
                 "reset_timeout_s": values[3].double_value}
print(json.dumps(out), flush=True)
"""


def test_parameters_are_described_typed_and_read_only_unless_live(ros_env):
    node = subprocess.Popen([sys.executable, "-m", "sgvla_ros.vla_policy", "--ros-args", "-p", "preload:=['']"],
                            env=ros_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        probe = subprocess.run([sys.executable, "-c", PROBE], env=ros_env, capture_output=True, text=True, timeout=120)
        assert probe.returncode == 0, probe.stdout + probe.stderr
        out = json.loads(probe.stdout.strip().splitlines()[-1])
    finally:
        node.terminate()
        log, _ = node.communicate(timeout=30)
    described = out["descriptors"]
    assert described["step_timeout_s"]["description"].startswith("no input of the current step for this long")
    assert all(d["description"] for d in described.values()), described
    assert described["lockstep"]["read_only"] and described["cameras"]["read_only"]
    assert not described["step_timeout_s"]["read_only"] and not described["reset_timeout_s"]["read_only"]
    sets = out["set"]
    assert not sets["lockstep"]["successful"] and "read-only" in sets["lockstep"]["reason"], sets
    assert sets["step_timeout_s"]["successful"], sets
    assert not sets["reset_timeout_s"]["successful"]
    assert sets["reset_timeout_s"]["reason"] == "reset_timeout_s must be a positive number (seconds), got -1.0"
    assert not sets["wrong_type"]["successful"] and sets["wrong_type"]["reason"], sets
    assert out["values"] == {"lockstep": True, "step_timeout_s": 7.5, "reset_timeout_s": 900.0}, (out, log[-2000:])
