"""sim_bridge: a simulated suite's environment on topics (LIBERO; any suite registered with a backend).

Serves `reset_episode` (the suite, its options, task, perturbation and seed: the backend comes from the suite's
registered config), takes `action`s, and publishes per control step what a robot has: `joint_states`, `eef_pose`
(forward kinematics), camera images with CameraInfo (when the episode renders them), `task`, `/clock` (simulation
time); the step's outcome on `sim/status`; and what only a simulator knows, on optional typed topics: the scene
(`sim/scene`: objects, their geometry, cameras, end effector, the goal) and `objects`. Lock-step (`lockstep:
true`): the simulator advances only when the action for the current (episode, step) arrives, so a run is as
deterministic as the in-process loop. Free-running: it steps at `rate_hz` with the latest action.
"""

import numpy as np
from geometry_msgs.msg import Point, PoseStamped, Quaternion, Vector3
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Header, String

import sgvla.plugins  # noqa: F401  (registers the suites: the default plan's suite gives the defaults)
from sgvla.core.state import object_aabbs
from sgvla.eval.config import default_suite
from sgvla.eval.suite import SuiteConfig
from sgvla.nodegraph.environment import EnvironmentSession, EnvironmentSettings
from sgvla_interfaces.msg import Action, ObjectState, ObjectStates, StepStatus
from sgvla_interfaces.msg import SceneState as SceneStateMsg
from sgvla_interfaces.srv import ResetEpisode
from sgvla_ros.graph_io import camera_info_msg, image_msg, stamp, stored_to_upright
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import ResourceNode, positive_parameter, run_node
from sgvla_ros.state_io import eef_pose_msg, joint_state_msg, key_values, scene_msg, status_msg, values_of


class SimBridge(ResourceNode):
    def __init__(self, **kwargs):
        super().__init__("sim_bridge", **kwargs)
        self.images_rotated = False
        self.declare_parameter("lockstep", True)
        self.declare_parameter("rate_hz", 20.0)  # free-running control steps per second
        self.declare_parameter("render_images", False)  # true: render even when the request does not ask
        self.declare_parameter("cameras", list(default_suite().rendered()))  # camera topics created up front
        self.declare_parameter("frame_id", "world")
        self.declare_parameter("preload", list(default_suite().backend_modules) or [""])  # modules imported now, not at the first reset
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        import importlib

        for module in param("preload"):
            if module:
                importlib.import_module(module)
        self.lockstep = bool(param("lockstep"))
        self.frame_id = param("frame_id")
        self.session = self.own(EnvironmentSession())
        self.ticks = 0  # control steps since start (settle steps included): simulation time
        self.latest_action: np.ndarray | None = None
        self.status_pub = self.create_publisher(StepStatus, "sim/status", QOS["control"])
        self.scene_pub = self.create_publisher(SceneStateMsg, "sim/scene", QOS["control"])
        self.joint_pub = self.create_publisher(JointState, "joint_states", QOS["control"])
        self.eef_pub = self.create_publisher(PoseStamped, "eef_pose", QOS["control"])
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
            self.camera_pubs[camera] = (
                self.create_publisher(Image, f"camera/{camera}/image_raw", QOS["frames"]),
                self.create_publisher(CameraInfo, f"camera/{camera}/camera_info", QOS["frames"]))
        return self.camera_pubs[camera]

    # -- service and subscriptions ----------------------------------------------------------------

    def on_reset(self, request: ResetEpisode.Request, response: ResetEpisode.Response):
        try:
            suite = SuiteConfig.choice(request.suite)(**values_of(request.suite_options))
            self.images_rotated = suite.images_rotated_180  # topics carry images upright, whatever the backend
            settings = EnvironmentSettings(suite, int(request.task_id), request.perturbation or "none",
                                           bool(request.render_images or self.get_parameter("render_images").value))
            state = self.session.reset(int(request.episode), settings, int(request.seed), int(request.max_steps))
        except Exception as exc:  # a bad suite, task or perturbation, or a simulator that failed to start
            self.get_logger().error(f"reset of episode {request.episode} failed: {exc!r}")
            response.ok, response.message = False, f"{type(exc).__name__}: {exc}"
            return response
        backend = self.session.backend
        self.ticks += backend.settle_steps + 1
        self.latest_action = None
        response.ok = True
        response.task = state.task
        response.camera_names = list(state.observation.images) or list(backend.camera_intrinsics())
        response.max_steps = state.max_steps
        facts = backend.record_facts()
        response.perturbation_applied = facts.pop("perturbation_applied", "none")
        response.episode_facts = key_values(facts)
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
        if not self.session.done and self.latest_action is not None:
            self.advance(self.latest_action)

    def advance(self, action: np.ndarray):
        try:
            state = self.session.step(action)
        except Exception as exc:  # the simulator failed: the episode ends without a result
            self.get_logger().error(f"episode {self.session.episode}: step failed: {exc!r}")
            self.session.done = True
            self.status_pub.publish(StepStatus(header=self.header(), episode=self.session.episode,
                                               step=self.session.steps, max_steps=self.session.max_steps,
                                               done=True, error=f"{type(exc).__name__}: {exc}"))
            return
        self.ticks += 1
        self.publish(state)

    # -- publishing -------------------------------------------------------------------------------

    def header(self) -> Header:
        return Header(stamp=stamp(self.ticks * self.session.backend.control_period_s), frame_id=self.frame_id)

    def publish(self, state):
        header = self.header()
        self.clock_pub.publish(Clock(clock=header.stamp))
        intrinsics = self.session.backend.camera_intrinsics()
        for camera, stored in state.observation.images.items():
            image_pub, info_pub = self._camera_pubs(camera)
            cam_header = Header(stamp=header.stamp, frame_id=f"{camera}_optical_frame")
            image_pub.publish(image_msg(stored_to_upright(stored) if self.images_rotated else stored, cam_header))
            if camera in intrinsics:
                info_pub.publish(camera_info_msg(intrinsics[camera], stored.shape[1], stored.shape[0], cam_header))
        robot_header = Header(stamp=header.stamp, frame_id="")
        self.joint_pub.publish(joint_state_msg(state.robot, robot_header))
        if state.robot.eef_position is not None:
            self.eef_pub.publish(eef_pose_msg(state.robot, header))
        self.publish_objects(state.scene, header)
        self.scene_pub.publish(scene_msg(state.scene, state.info, header, state.episode, state.step))
        self.status_pub.publish(status_msg(state, header))  # last: its (episode, step) says the rest is out

    def publish_objects(self, scene, header):
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
