"""Cameras: the synthetic source at its rate, reconnect after an unplug, clear errors for missing
devices, and a real OpenCV/RealSense device where one is plugged in."""

import glob
import threading
import time

import numpy as np
import pytest
import yaml

from sgvla.core.config import ConfigError, to_mapping
from sgvla.so101.cameras import AGENTVIEW, WRIST
from sgvla.so101.hardware.cameras import (
    Camera,
    CameraConfig,
    CameraError,
    OpenCVCameraConfig,
    RealSenseCameraConfig,
    SyntheticCameraConfig,
    TwinCameraConfig,
)
from sgvla.so101.hardware.config import load_hardware_config

DRIVERS = r"\['opencv', 'realsense', 'synthetic', 'twin'\]"


def synthetic(**kw) -> SyntheticCameraConfig:
    return SyntheticCameraConfig(**{"name": AGENTVIEW, "width": 64, "height": 48, "fps": 30, **kw})


def test_synthetic_frames_arrive_at_the_configured_rate():
    camera = Camera(synthetic(depth=True)).start()
    try:
        first = camera.latest()
        time.sleep(0.5)
        last = camera.wait_newer(first.index, 1.0)
    finally:
        camera.close()
    rate = (last.index - first.index) / (last.stamp - first.stamp)
    assert 25 < rate < 35
    assert last.color.shape == (48, 64, 3) and last.color.dtype == np.uint8
    assert last.depth.shape == (48, 64, 1) and last.depth.dtype == np.uint16 and 500 <= last.depth.min() < 900
    assert not np.array_equal(first.color, last.color)  # the square moves


def test_camera_reconnects_after_unplug():
    camera = Camera(synthetic(), reconnect_s=0.05).start()
    try:
        camera.source.unplug(0.4)
        time.sleep(0.15)
        assert not camera.connected
        stalled = camera.latest().index
        with pytest.raises(CameraError, match="disconnected, reconnecting"):
            camera.wait_newer(stalled, 0.1)
        frame = camera.wait_newer(stalled, 2.0)
    finally:
        camera.close()
    assert camera.reconnects == 1 and frame.index == stalled + 1


def test_config_errors_are_clear():
    with pytest.raises(ValueError, match="depth needs a driver that streams it .realsense, synthetic, twin.; opencv"):
        OpenCVCameraConfig(depth=True)
    with pytest.raises(TypeError, match="kind of camera driver"):
        CameraConfig()
    assert OpenCVCameraConfig(name=WRIST).frame_id == "wrist_optical_frame"
    assert TwinCameraConfig(name=WRIST).device == WRIST  # the twin's camera of the same name


@pytest.mark.parametrize(("camera", "match"), [
    ({"name": "a", "source": "kinect"}, rf"cameras\[0\]: unknown camera driver 'kinect'; choose from {DRIVERS}"),
    ({"name": "a", "device": "0"}, rf"cameras\[0\]: a camera driver needs a `source`; choose from {DRIVERS}"),
    ({"name": "a", "source": "synthetic", "device": "0"},
     r"cameras\[0\]\(synthetic\): unknown key\(s\) device; valid keys: calibration, depth, fps"),
    ({"name": "a", "source": "realsense", "serial": "1"},
     r"\(realsense\): unknown key\(s\) serial; valid keys: .*device"),
    ({"name": "a", "source": "twin", "device": "front"}, r"\(twin\): camera a: the twin has no camera 'front'; it has "
                                                          r"\['agentview', 'wrist'\]"),
    ({"name": "a", "source": "opencv", "depth": True}, r"\(opencv\): camera a: depth needs a driver that streams it"),
])
def test_an_unknown_driver_or_option_fails_when_the_rig_loads(tmp_path, camera, match):
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump({"cameras": [camera]}))
    with pytest.raises(ConfigError, match=match):
        load_hardware_config(str(tmp_path / "rig.yaml"))


def test_drivers_are_registered_choices_named_by_source(tmp_path):
    assert CameraConfig.choices() == {"opencv": OpenCVCameraConfig, "realsense": RealSenseCameraConfig,
                                      "synthetic": SyntheticCameraConfig, "twin": TwinCameraConfig}
    rig = load_hardware_config("so101")
    assert [type(c) for c in rig.cameras] == [RealSenseCameraConfig, OpenCVCameraConfig]
    assert to_mapping(rig.cameras[1])["source"] == "opencv"  # written back as it is read
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump({"cameras": [to_mapping(c) for c in rig.cameras]}))
    assert load_hardware_config(str(tmp_path / "rig.yaml")).cameras == rig.cameras
    assert OpenCVCameraConfig(device="/dev/video6").describe() == "opencv /dev/video6"


def test_missing_opencv_device_is_an_error_at_start():
    with pytest.raises(CameraError, match="cannot open video device '/dev/video99'"):
        Camera(OpenCVCameraConfig(device="/dev/video99")).start()


@pytest.mark.skipif(not glob.glob("/dev/video*"), reason="no V4L2 camera plugged in")
def test_real_opencv_camera():
    camera = Camera(OpenCVCameraConfig(name=WRIST, device=sorted(glob.glob("/dev/video*"))[0])).start()
    try:
        assert camera.latest().color.shape == (480, 640, 3)
    finally:
        camera.close()


def realsense_present() -> bool:
    try:
        import pyrealsense2 as rs
    except ImportError:
        return False
    return len(rs.context().query_devices()) > 0


@pytest.mark.skipif(not realsense_present(), reason="no RealSense plugged in")
def test_real_realsense_depth_is_aligned_to_color():
    camera = Camera(RealSenseCameraConfig(device="", depth=True)).start()
    try:
        frame = camera.wait_newer(camera.latest().index, 2.0)
    finally:
        camera.close()
    assert frame.color.shape == (480, 640, 3) and frame.depth.shape == (480, 640, 1)
    assert frame.depth.dtype == np.uint16 and frame.depth.max() > 0


class StepSource:
    """Frames exactly when the test releases them."""

    def __init__(self):
        self.released = threading.Semaphore(0)

    def open(self):
        pass

    def grab(self):
        self.released.acquire()
        return np.zeros((2, 2, 3), np.uint8), None

    def close(self):
        pass


def test_next_frame_gives_every_frame_once_and_at_most_one_behind():
    source = StepSource()
    camera = Camera(synthetic(), source=source)
    source.released.release()
    camera.start()
    try:
        def release(n):
            target = camera.latest().index + n
            for _ in range(n):
                source.released.release()
            camera.wait_newer(target - 1, 2.0)

        assert camera.next_frame(1) is None  # nothing new yet: the caller repeats its frame
        release(2)  # frames 2 and 3: the consumer takes 2 now, 3 next
        assert camera.next_frame(1).index == 2 and camera.next_frame(2).index == 3
        release(3)  # frames 4..6 while the consumer is at 3: it jumps to 5, one behind the newest
        assert camera.next_frame(3).index == 5
    finally:
        source.released.release()
        camera.close()
