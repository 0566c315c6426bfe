"""A camera of the rig as sensor_msgs/Image + CameraInfo: OpenCV/V4L2, RealSense (depth aligned to color), synthetic.

Topics under the camera's name: ``<name>/image_raw`` (rgb8), ``<name>/camera_info``, and for depth
streams ``<name>/depth/image_raw`` (16UC1 millimetres, pixel-aligned with color, so it shares the
color frame id and intrinsics) and ``<name>/depth/camera_info``. CameraInfo comes from the camera's
calibration file, scaled to the stream's resolution. QoS: sensor data (best effort, latest wins).
An unplugged camera is reopened every ``reconnect_s``; publishing resumes when frames come back. A managed
(lifecycle) node: configure opens the device, activate publishes, deactivate stops publishing, cleanup closes it.
"""

from sensor_msgs.msg import CameraInfo, Image
from sgvla_ros.runtime import HardwareNode, run_node
from sgvla_ros.qos import QOS

from sgvla.so101.cameras import AGENTVIEW
from sgvla.so101.hardware.calibration import load_camera_calibration
from sgvla.so101.hardware.cameras import Camera
from sgvla.so101.hardware.config import load_hardware_config


class CameraNode(HardwareNode):
    def __init__(self, **kwargs):
        super().__init__("camera", **kwargs)
        self.declare_parameter("config", "so101")  # rig: a name in config/hardware/ or a YAML path
        self.declare_parameter("camera", AGENTVIEW)  # a camera name of the rig
        self.declare_parameter("reconnect_s", 1.0)
        name = self.get_parameter("camera").value
        rig = load_hardware_config(self.get_parameter("config").value)
        config = next((c for c in rig.cameras if c.name == name), None)
        if config is None:
            raise ValueError(f"camera: no camera {name!r} in the rig config; it has {[c.name for c in rig.cameras]}")
        self.config = config
        self.info = None
        if config.calibration:
            cal = load_camera_calibration(config.calibration).scaled_to(config.width, config.height)
            self.info = CameraInfo(width=cal.width, height=cal.height, distortion_model=cal.distortion_model,
                                   d=list(cal.d), k=list(cal.k), r=list(cal.r), p=list(cal.p))
            self.info.header.frame_id = config.frame_id
        else:
            self.get_logger().warning(f"camera {name}: no calibration file, so no camera_info")
        publisher = self.create_lifecycle_publisher
        self.image_pub = publisher(Image, f"{name}/image_raw", QOS["sensor"])
        self.info_pub = publisher(CameraInfo, f"{name}/camera_info", QOS["sensor"])
        if config.depth:
            self.depth_pub = publisher(Image, f"{name}/depth/image_raw", QOS["sensor"])
            self.depth_info_pub = publisher(CameraInfo, f"{name}/depth/camera_info", QOS["sensor"])
        self.camera = self.timer = None
        self.published = 0

    def connect(self):
        config = self.config
        self.camera = self.own(Camera(config, reconnect_s=self.get_parameter("reconnect_s").value).start())
        self.get_logger().info(f"camera {config.name} ({config.describe()}) "
                               f"{config.width}x{config.height}@{config.fps}")

    def activate(self):
        self.timer = self.create_timer(0.5 / self.config.fps, self.publish_latest)  # twice the rate: no frame waits

    def deactivate(self):
        self.destroy_timer(self.timer)

    def image(self, pixels, encoding: str, stamp) -> Image:
        height, width = pixels.shape[:2]
        msg = Image(height=height, width=width, encoding=encoding, is_bigendian=0,
                    step=width * pixels.shape[2] * pixels.itemsize, data=pixels.tobytes())
        msg.header.stamp, msg.header.frame_id = stamp, self.config.frame_id
        return msg

    def publish_latest(self):
        frame = self.camera.latest()
        if frame is None or frame.index == self.published:
            if not self.camera.connected:
                self.get_logger().warning(f"camera {self.config.name}: disconnected, reconnecting",
                                          throttle_duration_sec=5.0)
            return
        self.published = frame.index
        stamp = self.get_clock().now().to_msg()
        self.image_pub.publish(self.image(frame.color, "rgb8", stamp))
        if self.info is not None:
            self.info.header.stamp = stamp
            self.info_pub.publish(self.info)
        if frame.depth is not None:
            self.depth_pub.publish(self.image(frame.depth, "16UC1", stamp))
            if self.info is not None:
                self.depth_info_pub.publish(self.info)


def main(args=None):
    raise SystemExit(run_node(CameraNode, args))


if __name__ == "__main__":
    main()
