"""The SO101 MuJoCo twin speaking the hardware topics: so101_arm and the rig's camera nodes, simulated.

Steps the twin's physics in real time (by the wall time since the last tick) at the rig's control rate and
publishes what the hardware publishes, with the same names, units and QoS: ``joint_states`` (radians, URDF
joint names), ``<camera>/image_raw``, ``<camera>/camera_info`` and, for depth cameras, ``<camera>/depth/...``
(16UC1 millimetres) at each camera's fps. Cameras are the rig config's (``source: twin``, ``device`` = the
twin's camera). Goals on ``joint_commands`` take the real arm's code path (TwinArm is FollowerArm with the
twin for motors: limits, max_step per tick, hold when stale). Also ``scene_graph/<camera>`` (the ground-truth
graph of the current scene, SceneGraph) at graph_rate_hz, with it ``scene_graph/markers`` (MarkerArray in ``world``:
boxes, names, an arrow per triplet, the target bowl and the place highlighted; while anything subscribes, with
``scene_markers``), ``scene_graph/<camera>/overlay`` (the graph drawn on the camera's newest image, while anything
subscribes) and ``task`` (the prompt, latched); ``twin/reset``
(std_msgs/Int64: a seed) places the objects again and the arm at rest. Each camera renders on threads of its own
with OpenGL contexts of its own (sgvla.so101.hardware.cameras.TwinSource, paced at the rig camera's fps, drawing
the twin's decimated render meshes outside its lock, at a lower scheduling priority), so a slow render (software
OpenGL) lowers that camera's rate, not the other camera's, the physics or the joint state rate.
"""

import time

from sensor_msgs.msg import CameraInfo, Image, JointState
from sgvla_ros.graph_io import camera_info_msg, image_msg, scene_graph_msg
from sgvla_ros.markers import OverlayPublishers, SceneMarkerPublisher
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import ResourceNode, run_node
from sgvla_ros.so101_arm import joint_state
from std_msgs.msg import Header, Int64, String

from sgvla.so101.cameras import CAMERAS
from sgvla.so101.hardware.cameras import Camera, TwinSource
from sgvla.so101.hardware.config import load_hardware_config
from sgvla.so101.hardware.joints import from_radians
from sgvla.so101.hardware.safety import UnsafeCommand
from sgvla.so101.twin.bus import TwinArm
from sgvla.nodegraph.markers import scene_boxes
from sgvla.so101.twin.config import TARGET, load_twin_config
from sgvla.so101.twin.twin import So101Twin
from sgvla_interfaces.msg import SceneGraph


def depth_msg(depth_mm, header) -> Image:
    msg = Image(height=depth_mm.shape[0], width=depth_mm.shape[1], encoding="16UC1", is_bigendian=0,
                step=depth_mm.shape[1] * 2, data=depth_mm.astype("<u2").tobytes())
    msg.header = header
    return msg


class SO101TwinNode(ResourceNode):
    def __init__(self, **kwargs):
        super().__init__("so101_twin", **kwargs)
        self.declare_parameter("config", "twin")  # rig: cameras (source: twin), control rate, safety limits
        self.declare_parameter("task_id", 0)  # config/twin/so101_tabletop.yaml's task
        self.declare_parameter("seed", 0)  # of the scene reset
        self.declare_parameter("cameras", list(CAMERAS))  # rig camera names to publish
        self.declare_parameter("graph_rate_hz", 5.0)  # ground-truth scene graphs per second; 0: none
        self.declare_parameter("max_catch_up_s", 0.25)  # physics catch-up per tick after a stall
        self.declare_parameter("scene_markers", True)  # scene_graph/markers (MarkerArray) while subscribed
        self.declare_parameter("render_meshes", "decimated")  # or "full": what cameras draw (config/twin's option)
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        rig = load_hardware_config(param("config"))
        by_name = {c.name: c for c in rig.cameras}
        wrong = [n for n in param("cameras") if n not in by_name or not by_name[n].needs_twin]
        if wrong:
            raise ValueError(f"so101_twin: camera(s) {wrong} are not 'source: twin' cameras of the rig "
                             f"{param('config')} (it has {[(c.name, c.type) for c in rig.cameras]})")
        # Released by destroy_node in reverse: cameras (each with its render thread), the arm (the twin holds where
        # it is), the twin.
        config = load_twin_config(overrides={"render_meshes": param("render_meshes")})
        self.twin = self.own(So101Twin(config, task_id=param("task_id")))
        self.twin.reset(param("seed"))
        self.arm = self.own(TwinArm(self.twin, rig.safety))
        self.arm.connect()
        self.twin.render_model  # made (or read from the cache) before the cameras start, not in their first frame
        self.cameras = {}
        for n in param("cameras"):
            self.cameras[n] = self.own(Camera(by_name[n], TwinSource(by_name[n], self.twin)).start(30.0))
        self.published = dict.fromkeys(self.cameras, 0)
        self.max_catch_up_s, self.last = param("max_catch_up_s"), time.monotonic()
        self.counts, self.simulated = dict.fromkeys(["joint_states", *self.cameras, "joint_commands"], 0), 0.0
        self.joint_pub = self.create_publisher(JointState, "joint_states", QOS["sensor"])
        self.create_subscription(JointState, "joint_commands", self.on_command, QOS["commands"])
        self.create_subscription(Int64, "twin/reset", self.on_reset, QOS["reliable"])
        self.pubs = {}
        for name, camera in self.cameras.items():
            kinds = ("image_raw", "camera_info", "depth/image_raw", "depth/camera_info")
            kinds = kinds if camera.config.depth else kinds[:2]
            self.pubs[name] = [self.create_publisher(Image if k.endswith("raw") else CameraInfo, f"{name}/{k}",
                                                     QOS["sensor"]) for k in kinds]
            # twice the frame rate, as the camera node: no frame waits long
            self.create_timer(0.5 / camera.config.fps, lambda n=name: self.publish_camera(n))
        self.graph_pubs = {n: self.create_publisher(SceneGraph, f"scene_graph/{n}", QOS["reliable"])
                           for n in self.cameras}
        self.scene_markers = SceneMarkerPublisher(self, bool(param("scene_markers")))
        self.overlays = OverlayPublishers(self, list(self.cameras))
        if param("graph_rate_hz") > 0:
            self.create_timer(1.0 / param("graph_rate_hz"), self.publish_graphs)
        self.create_publisher(String, "task", QOS["latched"]).publish(String(data=self.twin.task))
        self.create_timer(1.0 / rig.control_rate_hz, self.tick)
        self.create_timer(5.0, self.report_rates)
        self.get_logger().info(f"twin task {param('task_id')} ({self.twin.task!r}), seed {param('seed')}, "
                               f"{rig.control_rate_hz:g} Hz, cameras {list(self.cameras)}")

    def on_command(self, msg: JointState):
        self.counts["joint_commands"] += 1
        try:
            self.arm.command(from_radians(msg.name, msg.position))
        except (ValueError, UnsafeCommand) as e:  # refused whole; the previous target stands
            self.get_logger().error(f"command refused: {e}", throttle_duration_sec=2.0)

    def on_reset(self, msg: Int64):
        if msg.data < 0:
            self.get_logger().error(f"twin/reset: a seed is >= 0, got {msg.data}; the scene stays")
            return
        self.twin.reset(msg.data)  # objects placed again with this seed, the arm at its rest pose, settled
        self.arm.hold()  # stays at rest until the next command
        self.last = time.monotonic()
        self.get_logger().info(f"scene reset with seed {msg.data}")

    def tick(self):
        if not self.context.ok():  # shutting down (Ctrl-C): publishing would fail
            return
        now = time.monotonic()
        step = min(now - self.last, self.max_catch_up_s)  # real time, bounded after a stall
        self.twin.advance(step)
        self.last, self.simulated = now, self.simulated + step
        state = self.arm.read()
        self.arm.step()
        self.joint_pub.publish(joint_state(self, state.positions))
        self.counts["joint_states"] += 1

    def publish_camera(self, name: str):
        camera = self.cameras[name]
        frame = camera.latest()
        if frame is None or frame.index == self.published[name] or not self.context.ok():
            return
        self.published[name] = frame.index
        c = camera.config
        header = Header(stamp=self.get_clock().now().to_msg(), frame_id=c.frame_id)
        info = camera_info_msg(self.twin.intrinsics(c.device, c.width, c.height), c.width, c.height, header)
        pubs = self.pubs[name]
        pubs[0].publish(image_msg(frame.color, header))
        pubs[1].publish(info)
        if frame.depth is not None:
            pubs[2].publish(depth_msg(frame.depth, header))
            pubs[3].publish(info)
        self.counts[name] += 1

    def publish_graphs(self):
        header = Header(stamp=self.get_clock().now().to_msg(), frame_id="world")
        views = {camera.config.device: name for name, camera in self.cameras.items()}
        scene = self.twin.scene()
        graphs = self.twin.ground_truth(list(views), scene)
        for view, graph in graphs.items():
            self.graph_pubs[views[view]].publish(scene_graph_msg(graph, header))
            camera = self.cameras[views[view]]
            frame = camera.latest()  # the newest image, at most a frame older than the graph
            self.overlays.publish(views[view], None if frame is None else frame.color, graph,
                                  Header(stamp=header.stamp, frame_id=camera.config.frame_id))
        if self.scene_markers.wanted():
            self.scene_markers.publish(header, scene_boxes(scene), {views[v]: g.graph for v, g in graphs.items()},
                                       TARGET, self.twin.layout.place, prefix=f"{scene.source}/")

    def report_rates(self):
        counts, self.counts, simulated, self.simulated = self.counts, dict.fromkeys(self.counts, 0), self.simulated, 0.0
        self.get_logger().info("rates (Hz): " + ", ".join(f"{k} {v / 5.0:.1f}" for k, v in counts.items())
                               + f"; physics {simulated / 5.0:.2f} x real time")


def main(args=None):
    raise SystemExit(run_node(SO101TwinNode, args))


if __name__ == "__main__":
    main()
