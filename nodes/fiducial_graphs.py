"""fiducial_graphs: object poses from the rig cameras' fiducial markers, and reference scene graphs from them.

Subscribes to each camera's ``<camera>/image_raw`` and ``<camera>/camera_info`` (the stream's intrinsics), its
``<camera>/depth/image_raw`` where the rig camera has depth (16UC1 millimetres, aligned to color: the one with the
color image's stamp; a color image waits up to ``depth_wait_s`` for it, since a pose from color alone can be
centimetres off, then goes without), ``joint_states`` (radians: the wrist camera's pose by forward kinematics, the gripper's
state for carried objects) and ``task`` (the prompt: the relation rules of drawer tasks). At ``rate_hz`` the newest
frame of each camera goes through the perception library (`sgvla.so101.perception.live`: detection, PnP, depth,
fusion, tracking) and it publishes ``perception/objects`` (ObjectStates in ``base_link``: each tracked object's pose,
its configured extent's world-aligned box, per camera whether it shows and its box) and ``scene_graph/<camera>``
(SceneGraph, ``source: fiducial``: the perceived objects' graph by the simulator's projection and relation rules),
and, with ``scene_markers`` (default true) while anything subscribes, ``scene_graph/markers`` (MarkerArray in
``base_link``: each perceived object's box and name, an arrow per triplet of each camera's graph, the target bowl
highlighted; `sgvla_ros.markers`), and while anything subscribes ``scene_graph/<camera>/overlay`` (the graph drawn on
the image it was perceived in).
Nothing is published until every camera has sent its camera_info and an image (and joint_states
have come, for the wrist camera). The cameras' extrinsics are their calibration files (the rig camera's ``calibration``; a twin camera's: the twin
config's calibration of its device), as on the arm; nothing is read from a simulator.
"""

import time

import numpy as np
from geometry_msgs.msg import Point, Quaternion, Vector3
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Header, String

from sgvla.so101.cameras import CAMERAS
from sgvla.so101.hardware.calibration import load_camera_calibration
from sgvla.so101.hardware.config import load_hardware_config
from sgvla.so101.kinematics import quaternion_xyzw
from sgvla.paths import resolve_data_path
from sgvla.so101.perception.fiducials import load_marker_config
from sgvla.so101.perception.live import LivePerception, StreamImage
from sgvla.nodegraph.markers import oriented_box
from sgvla.so101.twin.config import TARGET
from sgvla.so101.twin.pick_place import PickPlaceParams
from sgvla_interfaces.msg import ObjectState, ObjectStates, SceneGraph
from sgvla_ros.graph_io import scene_graph_msg, upright_image_of
from sgvla_ros.markers import OverlayPublishers, SceneMarkerPublisher
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import ResourceNode, positive_parameter, run_node

FRAME = "base_link"
DEPTH_KEPT = 5  # newest depth images per camera, by stamp: a color image finds its own if the next depth came first
# The gripper counts as closed below the middle of the scripted grasp's open and closed angles (radians).
CLOSED_BELOW = PickPlaceParams().closed_below


def depth_metres(msg: Image) -> np.ndarray:
    if msg.encoding != "16UC1":
        raise ValueError(f"expected a 16UC1 depth image (millimetres), got {msg.encoding!r}")
    rows = np.frombuffer(bytes(msg.data), dtype="<u2" if not msg.is_bigendian else ">u2")
    return rows.reshape(msg.height, msg.step // 2)[:, : msg.width].astype(np.float32) / 1000.0


class FiducialGraphs(ResourceNode):
    def __init__(self, **kwargs):
        super().__init__("fiducial_graphs", **kwargs)
        self.declare_parameter("config", "so101")  # rig: its cameras (names, depth, calibration files)
        self.declare_parameter("cameras", list(CAMERAS))  # rig camera names to perceive with
        self.declare_parameter("markers", "config/perception/so101_markers.yaml")  # marker layout
        self.declare_parameter("rate_hz", 10.0)  # perception updates per second (newest frame of each camera)
        self.declare_parameter("use_depth", True)  # refine with aligned depth where the camera has it
        # longest a color image of a depth camera waits for its depth image (published just after it)
        self.declare_parameter("depth_wait_s", 0.5)
        self.declare_parameter("scene_markers", True)  # scene_graph/markers (MarkerArray) while subscribed
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        rig = load_hardware_config(param("config"))
        by_name = {c.name: c for c in rig.cameras}
        unknown = [n for n in param("cameras") if n not in by_name]
        if unknown:
            raise ValueError(f"fiducial_graphs: camera(s) {unknown} are not in the rig {param('config')} "
                             f"(it has {list(by_name)})")
        extrinsics = {n: load_camera_calibration(self.extrinsic_file(by_name[n])) for n in param("cameras")}
        self.live = LivePerception(load_marker_config(resolve_data_path(param("markers"))), extrinsics, CLOSED_BELOW)
        self.images: dict[str, Image] = {}
        self.depths: dict[str, dict[tuple[int, int], Image]] = {}  # per depth camera, by stamp
        self.waiting_since: dict[str, float] = {}  # per camera: since when its newest color image waits for depth
        self.depth_wait_s = positive_parameter(self, "depth_wait_s")
        self.done: dict[str, tuple[int, int]] = {}  # stamp of the last image perceived, per camera
        self.joints: dict[str, float] | None = None
        self.task = ""
        self.counts = {"updates": 0, "frames": 0}
        self.elapsed = 0.0
        use_depth = bool(param("use_depth"))
        for name in param("cameras"):
            self.create_subscription(Image, f"{name}/image_raw", lambda m, n=name: self.images.__setitem__(n, m),
                                     QOS["sensor"])
            self.create_subscription(CameraInfo, f"{name}/camera_info", lambda m, n=name: self.on_info(n, m),
                                     QOS["sensor"])
            if use_depth and by_name[name].depth:
                self.depths[name] = {}
                self.create_subscription(Image, f"{name}/depth/image_raw", lambda m, n=name: self.on_depth(n, m),
                                         QOS["sensor"])
        self.create_subscription(JointState, "joint_states", self.on_joints, QOS["sensor"])
        self.create_subscription(String, "task", lambda m: setattr(self, "task", m.data), QOS["latched"])
        self.objects_pub = self.create_publisher(ObjectStates, "perception/objects", QOS["reliable"])
        self.scene_markers = SceneMarkerPublisher(self, bool(param("scene_markers")))
        self.overlays = OverlayPublishers(self, param("cameras"))
        self.graph_pubs = {n: self.create_publisher(SceneGraph, f"scene_graph/{n}", QOS["reliable"])
                           for n in param("cameras")}
        self.create_timer(1.0 / positive_parameter(self, "rate_hz"), self.tick)
        self.create_timer(5.0, self.report)
        self.get_logger().info(f"fiducial perception on {list(param('cameras'))} at {param('rate_hz'):g} Hz, markers "
                               f"{param('markers')}")

    @staticmethod
    def extrinsic_file(camera) -> str:
        if camera.calibration:
            return camera.calibration
        if camera.needs_twin:
            from sgvla.so101.twin.config import load_twin_config

            config = load_twin_config()
            files = config.calibration_files()
            if camera.device in files:
                return files[camera.device]
        raise ValueError(f"fiducial_graphs: camera {camera.name!r} has no calibration file (its extrinsic places "
                         "it on the arm); set `calibration` in the rig config (`sgvla calibrate camera`)")

    def on_info(self, name: str, msg: CameraInfo) -> None:
        self.live.set_intrinsics(name, np.array(msg.k), np.array(msg.d), msg.width, msg.height)

    def on_depth(self, name: str, msg: Image) -> None:
        kept = self.depths[name]
        kept[(msg.header.stamp.sec, msg.header.stamp.nanosec)] = msg
        while len(kept) > DEPTH_KEPT:
            del kept[next(iter(kept))]

    def on_joints(self, msg: JointState) -> None:
        self.joints = dict(zip(msg.name, (float(p) for p in msg.position)))

    def tick(self) -> None:
        if not self.context.ok():
            return
        # Nothing is published before every camera can take part: a first graph from part of the rig would say
        # its other objects are not there.
        waiting = self.live.waiting_for(self.joints) + [f"{n}/image_raw" for n in self.graph_pubs
                                                        if n not in self.images]
        if waiting:
            self.get_logger().info(f"waiting for {', '.join(waiting)}", throttle_duration_sec=5.0)
            return
        streams, newest = {}, None
        for name, msg in self.images.items():
            key = (msg.header.stamp.sec, msg.header.stamp.nanosec)
            if self.done.get(name) == key:
                continue
            depth = self.depths[name].get(key) if name in self.depths else None
            if name in self.depths and depth is None:
                since = self.waiting_since.setdefault(name, time.monotonic())
                if time.monotonic() - since < self.depth_wait_s:
                    continue  # its depth image is on its way: perceived with it at a later tick
                self.get_logger().warning(f"{name}: no depth image with its color image's stamp within "
                                          f"{self.depth_wait_s:g} s; perceived from color alone",
                                          throttle_duration_sec=5.0)
            self.waiting_since.pop(name, None)
            self.done[name] = key
            streams[name] = StreamImage(upright_image_of(msg), None if depth is None else depth_metres(depth))
            newest = msg.header.stamp if newest is None or key > (newest.sec, newest.nanosec) else newest
        if not streams:
            return
        start = time.perf_counter()
        now = newest.sec + newest.nanosec * 1e-9
        poses = self.live.update(now, streams, self.joints)
        graphs = self.live.graphs(poses, self.task)
        self.elapsed += time.perf_counter() - start
        self.counts["updates"] += 1
        self.counts["frames"] += len(streams)
        header = Header(stamp=newest, frame_id=FRAME)
        for name, view in graphs.items():
            self.graph_pubs[name].publish(scene_graph_msg(view, header, SceneGraph.SOURCE_FIDUCIAL))
        self.publish_objects(poses, graphs, header)
        for name, stream in streams.items():  # each graph drawn on the image it was perceived in
            if name in graphs:
                self.overlays.publish(name, stream.image, graphs[name], self.images[name].header)
        if self.scene_markers.wanted():
            boxes = [oriented_box(n, poses[n].position, poses[n].pose[:3, :3], self.live.markers.objects[n].half_size)
                     for n in self.live.markers.objects if n in poses]
            self.scene_markers.publish(header, boxes, {c: v.graph for c, v in graphs.items()}, TARGET,
                                       prefix=f"{SceneGraph.SOURCE_FIDUCIAL}/")

    def publish_objects(self, poses, graphs, header) -> None:
        msg = ObjectStates(header=header)
        cameras = list(graphs)
        # In the marker config's order: the tracker's order is that of sightings, which differ from run to run.
        for name in (n for n in self.live.markers.objects if n in poses):
            pose = poses[name]
            obj = ObjectState(name=name)
            p, r = pose.position, pose.pose[:3, :3]
            obj.pose.position = Point(x=float(p[0]), y=float(p[1]), z=float(p[2]))
            x, y, z, w = quaternion_xyzw(r)
            obj.pose.orientation = Quaternion(x=x, y=y, z=z, w=w)
            half = np.asarray(self.live.markers.objects[name].half_size, dtype=np.float64)
            centre = p + r @ [0.0, 0.0, half[2]]
            aabb = np.abs(r) @ half
            obj.aabb_center = Vector3(x=float(centre[0]), y=float(centre[1]), z=float(centre[2]))
            obj.aabb_half_size = Vector3(x=float(aabb[0]), y=float(aabb[1]), z=float(aabb[2]))
            obj.camera_names = cameras
            obj.visible_in = [name in graphs[c].boxes for c in cameras]
            obj.boxes = [int(v) for c in cameras for v in graphs[c].boxes.get(name, (-1, -1, -1, -1))]
            msg.objects.append(obj)
        self.objects_pub.publish(msg)

    def report(self) -> None:
        counts, self.counts = self.counts, dict.fromkeys(self.counts, 0)
        elapsed, self.elapsed = self.elapsed, 0.0
        per = f", {1000 * elapsed / counts['frames']:.1f} ms per image" if counts["frames"] else ""
        self.get_logger().info(f"perception: {counts['updates'] / 5.0:.1f} updates/s over {counts['frames']} "
                               f"images{per}")


def main(args=None):
    raise SystemExit(run_node(FiducialGraphs, args))


if __name__ == "__main__":
    main()
