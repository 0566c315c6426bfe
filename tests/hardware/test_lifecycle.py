"""The arm node is a ROS 2 managed node: driven through its lifecycle services on the simulated bus, configure
connects with torque off, activate turns torque on and streams joint states, deactivate holds (torque on, no
stream), cleanup turns torque off, and a second configure/activate works again."""

import subprocess
import sys

import pytest

from .test_nodes import node, rig_config, start, stop

pytestmark = pytest.mark.ros

DRIVER = """
import sys, time
import rclpy
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from sensor_msgs.msg import JointState
from sgvla_ros.qos import QOS

rclpy.init()
node = rclpy.create_node("lifecycle_driver")
seen = []
node.create_subscription(JointState, "joint_states", seen.append, QOS["sensor"])
change = node.create_client(ChangeState, "/so101_arm/change_state")
get = node.create_client(GetState, "/so101_arm/get_state")
assert change.wait_for_service(timeout_sec=120), "no lifecycle service"


def call(client, request):
    future = client.call_async(request)
    rclpy.spin_until_future_complete(node, future, timeout_sec=60)
    return future.result()


for name in sys.argv[1:]:
    ok = call(change, ChangeState.Request(transition=Transition(id=getattr(Transition, f"TRANSITION_{name.upper()}"))))
    seen.clear()
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    state = call(get, GetState.Request()).current_state.label
    print(name, ok.success, state, len(seen), flush=True)
    sys.stdin.readline()  # the test reads the servos meanwhile
"""


def test_the_arm_node_follows_its_lifecycle(tmp_path, rig, ros_env):
    arm = start(node("so101_arm", config=rig_config(tmp_path, rig), autostart="false"), ros_env)
    steps = ["configure", "activate", "deactivate", "cleanup", "configure", "activate"]
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, *steps], env=ros_env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    expected = {  # state, torque on every servo, joint states streamed
        "configure": ("inactive", 0, False), "activate": ("active", 1, True), "deactivate": ("inactive", 1, False),
        "cleanup": ("unconfigured", 0, False)}
    try:
        for step in steps:
            line = driver.stdout.readline().split()
            assert line and line[0] == step, (line, driver.stderr.read() if driver.poll() is not None else "")
            state, torque, streams = expected[step]
            assert line[1:3] == ["True", state], line
            assert (int(line[3]) > 10) == streams, line
            if step != "cleanup":  # after cleanup the port is closed; the bus keeps the last registers it saw
                assert [rig.follower.register(i, "Torque_Enable") for i in range(1, 7)] == [torque] * 6, step
            else:
                assert [rig.follower.register(i, "Torque_Enable") for i in range(1, 7)] == [0] * 6
            driver.stdin.write("\n")
            driver.stdin.flush()
        assert driver.wait(timeout=60) == 0, driver.stderr.read()
    finally:
        if driver.poll() is None:
            driver.kill()
        log = stop(arm)
    assert [rig.follower.register(i, "Torque_Enable") for i in range(1, 7)] == [0] * 6, log[-2000:]  # off at exit
    assert "waiting for lifecycle transitions (autostart: false)" in log
