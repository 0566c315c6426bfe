"""sim_bridge: the LIBERO backend on topics (the SO101 twin has its own node, so101_twin, speaking the hardware topics).

Publishes per control step the privileged state (`sim/state`: SceneState, goal, robot state, success,
done), camera images with CameraInfo (when the episode renders them), joint states, object states and
`/clock` (simulation time); subscribes to `action`; serves `reset_episode`. Lock-step (`lockstep: true`):
the simulator advances only when the action for the current (episode, step) arrives, so a run is as
deterministic as the in-process loop. Free-running: it steps at `rate_hz` with the latest action.
The backend is built, reset and stepped by `sgvla.nodegraph.episode.SimSession`.
"""

import numpy as np
from geometry_msgs.msg import Point, Quaternion, Vector3
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Header, String

from sgvla.nodegraph.episode import HOLD_ACTION, SimSession, SimSettings
from sgvla.sim.state import object_aabbs
from sgvla_interfaces.msg import Action, ObjectState, ObjectStates, SimState
from sgvla_interfaces.srv import ResetEpisode
from sgvla_ros.graph_io import camera_info_msg, image_msg, stamp, state_to_msg, stored_to_upright
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import ResourceNode, positive_parameter, run_node


class SimBridge(ResourceNode):
    def __init__(self, **kwargs):
        super().__init__("sim_bridge", **kwargs)
        self.declare_parameter("lockstep", True)
        self.declare_parameter("rate_hz", 20.0)  # free-running control steps per second
        self.declare_parameter("render_profile", "fast")  # when a reset request leaves it empty
        self.declare_parameter("image_size", 256)  # when a reset request leaves it 0
        self.declare_parameter("render_images", False)  # true: render even when the request does not ask
        self.declare_parameter("cameras", ["agentview", "robot0_eye_in_hand"])  # camera topics created up front
        self.declare_parameter("frame_id", "world")
        self.declare_parameter("preload", True)  # import the simulator now, not at the first reset
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        if param("preload"):
            import sgvla.sim.libero_env  # noqa: F401
        self.lockstep = bool(param("lockstep"))
        self.frame_id = param("frame_id")
        self.session = self.own(SimSession())
        self.ticks = 0  # control steps since start (settle steps included): simulation time
        self.latest_action: np.ndarray | None = None
        self.state_pub = self.create_publisher(SimState, "sim/state", QOS["control"])
        self.joint_pub = self.create_publisher(JointState, "joint_states", QOS["reliable"])
        self.objects_pub = self.create_publisher(ObjectStates, "objects", QOS["reliable"])
        self.task_pub = self.create_publisher(String, "task", QOS["latched"])
        self.clock_pub = self.create_publisher(Clock, "/clock", QOS["clock"])
        self.camera_pubs: dict = {}
        for camera in param("cameras"):
            self._camera_pubs(camera)
        self.create_subscription(Action, "action", self.on_action, QOS["control"])
        self.create_service(ResetEpisode, "reset_episode", self.on_reset)
        if not self.lockstep:
            self.create_timer(1.0 / positive_parameter(self, "rate_hz"), self.tick)
        self.get_logger().info(f"ready ({'lock-step' if self.lockstep else 'free-running'})")

    def _camera_pubs(self, camera: str):
        if camera not in self.camera_pubs:
            from sensor_msgs.msg import CameraInfo, Image

            self.camera_pubs[camera] = (
                self.create_publisher(Image, f"camera/{camera}/image_raw", QOS["frames"]),
                self.create_publisher(CameraInfo, f"camera/{camera}/camera_info", QOS["frames"]))
        return self.camera_pubs[camera]

    # -- service and subscriptions ----------------------------------------------------------------

    def on_reset(self, request: ResetEpisode.Request, response: ResetEpisode.Response):
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        settings = SimSettings(int(request.task_id), request.perturbation or "none",
                               request.render_profile or param("render_profile"),
                               int(request.image_size) or int(param("image_size")),
                               bool(request.render_images or param("render_images")))
        try:
            state = self.session.reset(int(request.episode), settings, int(request.seed), int(request.max_steps))
        except Exception as exc:  # a bad task or perturbation: the evaluator records the failure
            self.get_logger().error(f"reset of episode {request.episode} failed: {exc!r}")
            response.ok, response.message = False, f"{type(exc).__name__}: {exc}"
            return response
        self.ticks += self.session.settle_steps + 1
        self.latest_action = None
        response.ok = True
        response.task = state.task
        response.camera_names = list(self.session.cameras)
        response.max_steps = state.max_steps
        response.perturbation_applied = self.session.perturbation_applied()
        self.task_pub.publish(String(data=state.task))
        self.publish(state)
        return response

    def on_action(self, msg: Action):
        s = self.session
        if s.done or msg.episode != s.episode:
            return
        if not self.lockstep:
            self.latest_action = np.asarray(msg.data, dtype=np.float64)
            return
        if msg.step != s.steps:  # a repeat of an action already applied
            return
        self.advance(np.asarray(msg.data, dtype=np.float64))

    def tick(self):
        if not self.session.done:
            self.advance(HOLD_ACTION if self.latest_action is None else self.latest_action)

    def advance(self, action: np.ndarray):
        state = self.session.step(action)
        self.ticks += 1
        self.publish(state)

    # -- publishing -------------------------------------------------------------------------------

    def publish(self, state):
        t = self.ticks * self.session.control_period_s
        header = Header(stamp=stamp(t), frame_id=self.frame_id)
        self.clock_pub.publish(Clock(clock=header.stamp))
        intrinsics = self.session.camera_intrinsics()
        for camera, stored in state.observation.images.items():
            image_pub, info_pub = self._camera_pubs(camera)
            cam_header = Header(stamp=header.stamp, frame_id=f"{camera}_optical_frame")
            image_pub.publish(image_msg(stored_to_upright(stored), cam_header))
            if camera in intrinsics:
                info_pub.publish(camera_info_msg(intrinsics[camera], stored.shape[1], stored.shape[0], cam_header))
        self.publish_joints(state, header)
        self.publish_objects(state, header)
        self.state_pub.publish(state_to_msg(state, t, self.frame_id))

    def publish_joints(self, state, header):
        robot = state.observation.raw.get("robot_state")
        if robot is None:
            return
        arm, gripper = self.session.joint_names()
        msg = JointState(header=Header(stamp=header.stamp, frame_id=""))
        msg.name = arm + gripper
        msg.position = [float(x) for x in np.r_[robot["joints"]["pos"], robot["gripper"]["qpos"]]]
        msg.velocity = [float(x) for x in np.r_[robot["joints"]["vel"], robot["gripper"]["qvel"]]]
        self.joint_pub.publish(msg)

    def publish_objects(self, state, header):
        scene = state.scene
        centers, halves = object_aabbs(scene)
        msg = ObjectStates(header=header)
        for name, pos, c, h in zip(scene.objects, scene.positions, centers, halves):
            obj = ObjectState(name=name)
            obj.pose.position = Point(x=float(pos[0]), y=float(pos[1]), z=float(pos[2]))
            obj.pose.orientation = Quaternion(w=1.0)  # the state carries body positions only
            obj.aabb_center = Vector3(x=float(c[0]), y=float(c[1]), z=float(c[2]))
            obj.aabb_half_size = Vector3(x=float(h[0]), y=float(h[1]), z=float(h[2]))
            msg.objects.append(obj)
        self.objects_pub.publish(msg)


def main(args=None):
    raise SystemExit(run_node(SimBridge, args))


if __name__ == "__main__":
    main()
