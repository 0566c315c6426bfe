"""sim_bridge publishes every suite's camera images upright, as cameras and datasets hold them: LIBERO's backend
stores them turned 180 degrees (turned back on the topic), the SO101 twin's upright (published as they are; they
were once turned too, so the twin looked upside down to every subscriber but the policy node, which turned them
back). The image on the topic after a reset equals the suite backend's own image of the same reset, upright."""

import subprocess
import sys

import numpy as np
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.sim]

PROBE = """
import sys, time, numpy as np, rclpy
from sensor_msgs.msg import Image
from sgvla_interfaces.srv import ResetEpisode
from sgvla_ros.graph_io import upright_image_of
from sgvla_ros.qos import QOS
from sgvla_ros.state_io import key_values
rclpy.init()
node = rclpy.create_node("probe")
images = []
node.create_subscription(Image, "camera/agentview/image_raw", images.append, QOS["frames"])
client = node.create_client(ResetEpisode, "reset_episode")
assert client.wait_for_service(timeout_sec=180), "no reset_episode service"
for attempt in range(20):  # the bridge's image publisher appears with its first reset; each reset publishes again
    request = ResetEpisode.Request(episode=1, suite="so101_twin", suite_options=key_values({"image_size": 64}),
                                   task_id=1, perturbation="none", seed=2, render_images=True)
    future = client.call_async(request)
    rclpy.spin_until_future_complete(node, future, timeout_sec=180)
    assert future.result() is not None and future.result().ok, future.result()
    deadline = time.monotonic() + 3
    while not images and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    if images:
        break
assert images, "no agentview image after 20 resets"
np.save(sys.argv[1], upright_image_of(images[-1]))
"""


def test_twin_images_are_published_upright(tmp_path, ros_env):
    from sgvla.eval.suite import SuiteConfig
    import sgvla.plugins  # noqa: F401

    bridge = subprocess.Popen([sys.executable, "-m", "sgvla_ros.sim_bridge"], env=ros_env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        probe = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "topic.npy")], env=ros_env,
                               capture_output=True, text=True, timeout=400)
    finally:
        bridge.terminate()
        log = bridge.communicate(timeout=60)[0]
    assert probe.returncode == 0, probe.stderr[-3000:] + log[-3000:]
    published = np.load(tmp_path / "topic.npy")

    suite = SuiteConfig.choice("so101_twin")(image_size=64)
    assert not suite.images_rotated_180
    backend = suite.make_backend(1, "none", render_images=True)
    try:
        own = backend.reset(2).images["agentview"]
    finally:
        backend.close()
    assert published.shape == own.shape == (64, 64, 3)
    assert np.array_equal(published, own), "the twin's image on the topic is not the backend's upright image"
