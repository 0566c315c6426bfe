"""The vlm_query node with real rclpy over loopback DDS: camera images in, VLM scene graphs out."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ros

IMAGE_PUBLISHER = """
import sys, rclpy
from sensor_msgs.msg import Image
from sgvla_ros.qos import QOS
rclpy.init()
node = rclpy.create_node("camera_stub")
pub = node.create_publisher(Image, "image", QOS["sensor"])
msg = Image(height=32, width=48, encoding="bgr8", step=48 * 3 + 4, data=bytes((48 * 3 + 4) * 32))
node.create_timer(0.05, lambda: pub.publish(msg))
rclpy.spin(node)
"""


def node(module: str, **params) -> list[str]:
    cmd = [sys.executable, "-m", f"sgvla_ros.{module}", "--ros-args"]
    for key, value in params.items():
        cmd += ["-p", f"{key}:={value}"]
    return cmd


def test_vlm_query_publishes_vlm_graphs(tmp_path, ros_env, stub):
    client = tmp_path / "client.yaml"
    client.write_text(f"type: openai\nname: stub-vlm\nmodel: m\nbase_url: {stub.url('ok')}\nmax_retries: 0\n")
    out = tmp_path / "graphs.jsonl"
    commands = [node("vlm_query", client=client, camera="wrist", task="put the bowl on the plate", rate_hz=5.0),
                [sys.executable, "-c", IMAGE_PUBLISHER]]
    procs = [subprocess.Popen(cmd, env=ros_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for cmd in commands]
    try:
        recorder = subprocess.run(node("graph_recorder", output=out, count=2), env=ros_env,
                                  capture_output=True, text=True, timeout=90)
    finally:
        for p in procs:
            p.terminate()
        logs = [p.communicate(timeout=20)[0] for p in procs]
    assert recorder.returncode == 0, recorder.stderr + "\n".join(logs)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2
    for r in records:
        assert r["source"] == "vlm" and r["camera"] == "robot0_eye_in_hand" and r["model"] == "stub-vlm"
        assert len(r["triplets"]) == 4 and r["prompt_version"].startswith("scene_graph-v1-")
    body = next(b for mode, b in reversed(stub.calls) if mode == "ok")
    assert "Task: put the bowl on the plate" in body["messages"][1]["content"][-1]["text"]


def test_image_conversion_honours_encoding_and_step():
    import numpy as np
    from sensor_msgs.msg import Image

    from sgvla_ros.vlm_query import image_to_array

    bgr = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    data = np.concatenate([bgr.reshape(2, 9), np.zeros((2, 2), np.uint8)], axis=1).tobytes()
    rgb = image_to_array(Image(height=2, width=3, encoding="bgr8", step=11, data=data))
    np.testing.assert_array_equal(rgb, bgr[..., ::-1])
    with pytest.raises(ValueError, match="unsupported image encoding"):
        image_to_array(Image(height=1, width=1, encoding="32FC1", step=4, data=bytes(4)))
