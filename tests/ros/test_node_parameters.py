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


SETTINGS_PROBE = r"""
import json, sys
import rclpy
from dataclasses import asdict
from rclpy.parameter import Parameter
from rclpy.exceptions import InvalidParameterValueException
from sgvla_ros.runtime import SgvlaNode
from sgvla.so101.recording import RecordingSettings

rclpy.init()

class Recorder(SgvlaNode):  # what dataset_recorder and teleop_recorder declare, without their arms and dataset
    def __init__(self, name, **kwargs):
        super().__init__(name, **kwargs)
        self.settings = self.declare_settings(RecordingSettings)

out = {}
for name in ("dataset_recorder", "teleop_recorder"):  # documented in config/ros/hardware.yaml | by the help only
    node = Recorder(name, parameter_overrides=[Parameter("episodes", value=3)])
    described = {}
    for d in node.describe_parameters(list(node._parameters)):
        described[d.name] = {"type": d.type, "read_only": d.read_only, "description": d.description,
                             "int": [[r.from_value, r.to_value] for r in d.integer_range],
                             "float": [[r.from_value, r.to_value] for r in d.floating_point_range]}
    out[name] = {"settings": asdict(node.settings), "described": described}
    node.destroy_node()
try:
    Recorder("teleop_recorder", parameter_overrides=[Parameter("episode_time_s", value=0.0)])
    out["refused"] = ""
except InvalidParameterValueException as e:
    out["refused"] = str(e)
print(json.dumps(out), flush=True)
"""


def test_recording_settings_are_the_recorders_parameters_with_their_ranges(ros_env):
    """dataset_recorder's and teleop_recorder's recording parameters are RecordingSettings' fields (`declare_settings`):
    its defaults and types, read-only, described (the parameter file's comment, else the help), an integer or
    floating-point range from the minimum; a value below it is refused at start with rclpy's reason."""
    from rcl_interfaces.msg import ParameterType

    from sgvla.core.settings import specs
    from sgvla.so101.recording import RecordingSettings

    probe = subprocess.run([sys.executable, "-c", SETTINGS_PROBE], env=ros_env, capture_output=True, text=True,
                           timeout=120)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    out = json.loads(probe.stdout.strip().splitlines()[-1])
    types = {bool: ParameterType.PARAMETER_BOOL, int: ParameterType.PARAMETER_INTEGER,
             float: ParameterType.PARAMETER_DOUBLE, str: ParameterType.PARAMETER_STRING}
    for name in ("dataset_recorder", "teleop_recorder"):
        assert out[name]["settings"] == {**{s.name: s.default for s in specs(RecordingSettings)}, "episodes": 3}
        described = out[name]["described"]
        for spec in specs(RecordingSettings):
            d = described[spec.name]
            assert d["type"] == types[spec.kind] and d["read_only"] and d["description"] == spec.help, (name, d)
            ranges = d["int"] + d["float"]
            if spec.minimum is None:
                assert ranges == [], (name, spec.name)
            else:
                assert len(ranges) == 1 and ranges[0][0] == spec.minimum and ranges[0][1] > 1e9, (name, spec.name)
                assert d["int" if spec.kind is int else "float"] == ranges
    assert "episode_time_s" in out["refused"] and "out of range" in out["refused"], out["refused"]
