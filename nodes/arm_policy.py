"""arm_policy: runs evaluation episodes (the `run_episode` action) on the physical arm, with an operator.

The hardware counterpart of vla_policy: the evaluator sends it the same goals. There is no simulator to reset and
nothing judges success, so an episode is the operator's protocol (`sgvla.so101.hardware.protocol`):

1. home: joint goals towards the suite's home pose on `joint_commands`, at most `home_step_deg` per control tick
   from where the arm is (the so101_arm node's safety layer clamps them again), until every joint is within
   `home_tolerance_deg` (not within `home_timeout_s`: an infrastructure failure);
2. the scene card on `eval/operator` (latched): task, perturbation, policy, seed; the context mode only when the
   plan is not `blind`. The operator sets the scene and publishes `start` on `eval/confirm`;
3. the episode engine (`sgvla.core.episode`, the standard prompt) steps the policy at the suite's control rate on
   the latest `joint_states` (degrees, as `sgvla record` stores them) and sends its goals on `joint_commands`,
   until the time limit or `stop` on `eval/confirm` (or a verdict, which also ends it);
4. the operator's verdict on `eval/verdict`: ``success|failure|invalid [note]``. The record (verdict, its source,
   note, home-pose error, the phases' durations) is the action's result; an invalid one is redone by the evaluator.

Perception (the suite's ``perception: true``, `sgvla launch so101_eval perception=true`): the live graph of graph
modes is the newest ``scene_graph/<view>`` of source fiducial (boxes from ``perception/objects``), and policies that
read the scene (prompt_grounded, expert) get the scene as perceived: the objects of ``perception/objects`` with
their configured extents and the gripper frame by forward kinematics at the joint states (never a simulator's
state); they drive the suite's pick-and-place controller, whose joint goals (radians) are converted to the arm's
units. Perception older than ``perception_timeout_s`` is an infrastructure failure. The prompt goes out on ``task``
(latched) for fiducial_graphs' relation rules.

Learned policies (LeRobot checkpoints trained on SO101 data: act, smolvla, pi0, pi05, lerobot with a ``path``):
the observation is the joint states in LeRobot units and the images of the rig cameras the checkpoint's features
name (``<camera>/image_raw``, resized to the features' shapes; `sgvla.so101.learned`); chunks are computed in a
background thread while the current one plays (`So101ChunkedPolicy`), so the control loop never waits for
inference (before the first chunk the arm holds); the step's prompt (standard, or with the live graph) is the
task of the chunk asked for at that step; goals are LeRobot units, sent in radians on ``joint_commands`` through
the arm node's safety layer. ``min_inference_s`` pads each inference (a slow model, stood in for in tests).
An image older than ``image_timeout_s`` is an infrastructure failure, not the policy's.

Rollouts: with ``rollouts`` (a dataset folder; `sgvla launch so101_eval` sets ``<output_dir>/rollouts``) every
episode that gets a verdict is saved as an episode of a LeRobot dataset (`sgvla.so101.hardware.rollouts`: state,
goal and the ``cameras``' images per control step of the run, the layout of `sgvla record`), invalid ones included
and marked in its ``sgvla_rollouts.jsonl``; the record holds ``rollout_dataset``, ``rollout_episode`` and
``rollout_frames``. An episode cut short (a kill, an infrastructure failure) is not saved.

The keyboard: when the node's stdin is a terminal (`sgvla launch so101_eval` in a terminal hands it on; `ros2
launch` gives nodes none) and `keyboard` is true, lines typed there count as well: Enter (or start) confirms,
stop stops, anything else is a verdict (its source: keyboard). Operator text that is none of these is refused on
`eval/operator` with what is valid, and waited for again.
"""

import dataclasses
import sys
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String

import sgvla.plugins  # noqa: F401  (registers suites, policies, context modes)
from sgvla.core.context import ContextMode
from sgvla.core.episode import Episode, EpisodeKey, EpisodeRecord, InfrastructureFailure
from sgvla.core.protocols import Step
from sgvla.core.state import Observation
from sgvla.eval.suite import SuiteConfig
from sgvla.paths import resolve_data_path
from sgvla.policies.registry import PolicyConfig
from sgvla.policies.session import PolicySession
from sgvla.scene_graph import Graph, ViewGraph, load_ontology
from sgvla.so101.hardware.config import load_hardware_config
from sgvla.so101.hardware.joints import JOINTS, from_radians, to_radians
from sgvla.so101.hardware.recording import RecordingError
from sgvla.so101.hardware.rollouts import RolloutStore
from sgvla.so101.learned import So101ChunkedPolicy
from sgvla.so101.kinematics import Kinematics, quaternion_matrix, transform
from sgvla.so101.perception.fiducials import load_marker_config
from sgvla.so101.perception.live import perceived_scene
from sgvla.so101.perception.poses import ObjectPose
from sgvla.so101.hardware.protocol import (
    NoGraph,
    OperatorInputError,
    home_error,
    home_goal,
    parse_confirm,
    parse_keyboard,
    parse_verdict,
    scene_card,
    verdict_facts,
)
from sgvla_interfaces.action import RunEpisode
from sgvla_interfaces.msg import ObjectStates, SceneGraph
from sgvla_ros.graph_io import upright_image_of
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import ResourceNode, run_node, sleep
from sgvla_ros.state_io import record_msg, values_of


class PerceivedGraph:
    """The graph source of an episode on the arm with perception: the newest fiducial graph of the view, with the
    boxes perception/objects gives for that camera."""

    name = SceneGraph.SOURCE_FIDUCIAL

    def __init__(self, node: "ArmPolicy") -> None:
        self.node = node
        self.graphs = 0

    def reset(self) -> None:
        self.graphs = 0

    def view_graph(self, view, observation, scene, task) -> ViewGraph:
        msg = self.node.fresh(self.node.graphs.get(view), f"scene_graph/{view}")
        objects = self.node.fresh(self.node.objects, "perception/objects")
        boxes = {}
        for obj in objects.objects:
            if view in obj.camera_names:
                i = list(obj.camera_names).index(view)
                if obj.visible_in[i]:
                    boxes[obj.name] = tuple(int(v) for v in obj.boxes[4 * i:4 * i + 4])
        self.graphs += 1
        return ViewGraph(view, Graph.of([(t.subject, t.relation, t.object) for t in msg.triplets]),
                         {n: boxes.get(n, (0, 0, 0, 0)) for n in msg.objects})

    def stats(self) -> dict:
        return {"graphs": self.graphs}

    def close(self) -> None:
        pass


class ArmPolicy(ResourceNode):
    def __init__(self, **kwargs):
        super().__init__("arm_policy", **kwargs)
        self.declare_parameter("config", "so101")  # rig: its safety limits bound the home goals too
        self.declare_parameter("joint_timeout_s", 5.0)  # no joint state for this long: an infrastructure failure
        self.declare_parameter("keyboard", True)  # also read the operator's lines from stdin when it is a terminal
        self.declare_parameter("markers", "config/perception/so101_markers.yaml")  # objects' extents (perception)
        self.declare_parameter("perception_timeout_s", 1.0)  # perceived objects or graph older: infrastructure failure
        self.declare_parameter("cameras", ["agentview", "wrist"])  # rig cameras recorded in the rollouts ([""]: none)
        self.declare_parameter("image_timeout_s", 1.0)  # a camera image older than this: infrastructure failure
        self.declare_parameter("rollouts", "")  # LeRobot dataset folder of the episodes' rollouts; empty: none
        self.declare_parameter("rollout_repo_id", "local/so101_eval_rollouts")
        self.declare_parameter("min_inference_s", 0.0)  # learned policies: pad each chunk's inference to this long
        self.declare_parameter("refill_at", 0.5)  # learned policies: next chunk when this share of the current is left
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        self.markers = load_marker_config(resolve_data_path(param("markers")))
        self.perception_timeout_s = float(param("perception_timeout_s"))
        self.kinematics = Kinematics()
        self.radians: dict[str, float] = {}  # the latest joint state as published (forward kinematics)
        self.objects = None  # (arrival time, ObjectStates) of perception/objects
        self.graphs: dict[str, tuple[float, SceneGraph]] = {}  # view -> (arrival time, the newest fiducial graph)
        rig = load_hardware_config(param("config"))
        self.safety = rig.safety
        by_name = {c.name: c for c in rig.cameras}
        self.record_cameras = [n for n in param("cameras") if n]
        missing = [n for n in self.record_cameras if n not in by_name]
        if missing:
            raise ValueError(f"arm_policy: camera(s) {missing} not in the rig config; it has {list(by_name)}")
        self.camera_sizes = {n: (by_name[n].height, by_name[n].width) for n in self.record_cameras}
        self.image_timeout_s = float(param("image_timeout_s"))
        self.rollout_root = param("rollouts")
        self.rollout_repo_id = param("rollout_repo_id")
        self.rollouts: RolloutStore | None = None  # opened at the first episode (the run folder exists by then)
        self.learned = {"min_inference_s": float(param("min_inference_s")), "refill_at": float(param("refill_at"))}
        self.images: dict[str, tuple[float, Image]] = {}  # camera -> (arrival time, the newest image)
        self.pixels: dict[str, tuple[Image, np.ndarray]] = {}  # camera -> (that image, its array)
        self.joint_timeout_s = float(param("joint_timeout_s"))
        self.joints: dict[str, float] | None = None  # the latest state, LeRobot units
        self.joints_at = 0.0
        self.confirms: deque[str] = deque()
        self.verdicts: deque = deque()
        self.policies = self.own(PolicySession())  # closed with the node
        self.busy = False
        self.command_pub = self.create_publisher(JointState, "joint_commands", QOS["commands"])
        self.operator_pub = self.create_publisher(String, "eval/operator", QOS["latched"])
        self.task_pub = self.create_publisher(String, "task", QOS["latched"])
        self.create_subscription(ObjectStates, "perception/objects",
                                 lambda m: setattr(self, "objects", (time.monotonic(), m)), QOS["reliable"])
        for view in ("agentview", "wrist"):  # the so101_hardware suite's views
            self.create_subscription(SceneGraph, f"scene_graph/{view}", self.on_graph, QOS["reliable"])
        self.create_subscription(JointState, "joint_states", self.on_joints, QOS["sensor"])
        for camera in self.record_cameras:
            self.watch(camera)
        self.create_subscription(String, "eval/confirm", self.on_confirm, QOS["reliable"])
        self.create_subscription(String, "eval/verdict", self.on_verdict, QOS["reliable"])
        # An episode is one coroutine; in a group of its own it never blocks the inputs it awaits.
        self.server = ActionServer(self, RunEpisode, "run_episode", execute_callback=self.execute,
                                   goal_callback=lambda _: GoalResponse.REJECT if self.busy else GoalResponse.ACCEPT,
                                   cancel_callback=lambda _: CancelResponse.ACCEPT,
                                   callback_group=ReentrantCallbackGroup())
        keyboard = bool(param("keyboard")) and sys.stdin is not None and sys.stdin.isatty()
        self.or_keys = " (or type it here)" if keyboard else ""
        if keyboard:  # a daemon thread: a blocked read must not keep the process alive
            threading.Thread(target=self.read_keyboard, name="operator_keyboard", daemon=True).start()
        self.get_logger().info("ready: episodes on the arm, operator on eval/operator, eval/confirm, eval/verdict"
                               + (" and this terminal" if keyboard else ""))

    def destroy_node(self):
        if self.rollouts is not None:  # drops an episode not saved, releases the dataset writer
            self.rollouts.close()
            self.rollouts = None
        super().destroy_node()

    # -- inputs -----------------------------------------------------------------------------------

    def on_joints(self, msg: JointState) -> None:
        self.joints = from_radians(msg.name, msg.position)
        self.radians = dict(zip(msg.name, (float(p) for p in msg.position)))
        self.joints_at = time.monotonic()

    def watch(self, camera: str) -> None:
        """Keep the newest image of ``<camera>/image_raw`` (once per camera)."""
        if camera not in self.images:
            self.images[camera] = (float("-inf"), None)
            self.create_subscription(Image, f"{camera}/image_raw",
                                     lambda m, c=camera: self.images.__setitem__(c, (time.monotonic(), m)),
                                     QOS["sensor"])

    def image(self, camera: str) -> np.ndarray:
        """The newest image of a camera (upright RGB), or an infrastructure failure when there is none this recent."""
        arrived, msg = self.images[camera]
        if time.monotonic() - arrived > self.image_timeout_s:
            raise InfrastructureFailure(f"no {camera}/image_raw within image_timeout_s={self.image_timeout_s:g} "
                                        "(is the camera node running? `sgvla launch so101_eval cameras=true`)")
        cached = self.pixels.get(camera)
        if cached is None or cached[0] is not msg:
            cached = self.pixels[camera] = (msg, upright_image_of(msg))
        return cached[1]

    def on_graph(self, msg: SceneGraph) -> None:
        if msg.source == SceneGraph.SOURCE_FIDUCIAL:
            self.graphs[msg.camera] = (time.monotonic(), msg)

    def fresh(self, received, topic: str):
        """The message of (arrival time, message), or an infrastructure failure when there is none this recent."""
        if received is None or time.monotonic() - received[0] > self.perception_timeout_s:
            raise InfrastructureFailure(f"no {topic} within perception_timeout_s={self.perception_timeout_s:g} "
                                        "(is fiducial_graphs running? `sgvla launch so101_eval perception=true`)")
        return received[1]

    def perceived(self, task: str):
        """The scene as perceived now (perception/objects, forward kinematics at the joint states)."""
        self.present()
        poses = {}
        for obj in self.fresh(self.objects, "perception/objects").objects:
            if obj.name in self.markers.objects:
                q, p = obj.pose.orientation, obj.pose.position
                poses[obj.name] = ObjectPose(obj.name, transform(quaternion_matrix([q.x, q.y, q.z, q.w]),
                                                                 [p.x, p.y, p.z]), 0.0, 0, 0.0)
        return perceived_scene(poses, self.markers, self.kinematics, self.radians, task)

    def on_confirm(self, msg: String) -> None:
        try:
            self.confirms.append(parse_confirm(msg.data))
        except OperatorInputError as e:
            self.say(f"refused: {e}")

    def on_verdict(self, msg: String) -> None:
        try:
            self.verdicts.append(parse_verdict(msg.data, "topic"))
        except OperatorInputError as e:
            self.say(f"refused: {e}")

    def read_keyboard(self) -> None:
        for line in sys.stdin:
            try:
                kind, value = parse_keyboard(line)
            except OperatorInputError as e:
                self.say(f"refused: {e}")
                continue
            (self.confirms if kind == "confirm" else self.verdicts).append(value)

    def say(self, text: str) -> None:
        """A line for the operator: on eval/operator (latched) and in the log."""
        self.operator_pub.publish(String(data=text))
        self.get_logger().info(f"operator: {text}")

    def present(self) -> dict[str, float]:
        if self.joints is None or time.monotonic() - self.joints_at > self.joint_timeout_s:
            raise InfrastructureFailure(f"no joint_states from the arm within joint_timeout_s={self.joint_timeout_s:g}")
        return dict(self.joints)

    def command(self, goal: dict[str, float]) -> None:
        msg = JointState(name=list(goal), position=to_radians(goal))
        msg.header.stamp = self.get_clock().now().to_msg()
        self.command_pub.publish(msg)

    # -- the action -------------------------------------------------------------------------------

    def policy(self, goal, suite):
        config = PolicyConfig.choice(goal.policy_type)(**values_of(goal.policy_options))
        env = dataclasses.replace(suite.lerobot_env_config(), **self.learned) if config.learned else None
        policy = self.policies.get(config, suite, env)
        if isinstance(policy, So101ChunkedPolicy):  # the images it reads: subscribed before the episode runs
            for camera in policy.checkpoint.cameras:
                self.watch(camera)
        return policy

    async def execute(self, goal_handle):
        goal = goal_handle.request
        self.busy = True
        key = EpisodeKey(goal.policy, int(goal.task_id), goal.perturbation, goal.mode, int(goal.seed))
        try:
            record = await self.episode(goal, key)
        except Exception as exc:  # the arm, a bad spec, a policy that raised: no result, the next run retries it
            self.get_logger().error(f"episode {goal.episode}: {type(exc).__name__}: {exc}")
            record = EpisodeRecord(*key, success=False, steps=0, max_steps=int(goal.max_steps), wall_time_s=0.0,
                                   view=goal.view, infra_failure=f"{type(exc).__name__}: {exc}")
        finally:
            self.busy = False
        goal_handle.succeed()
        return RunEpisode.Result(record=record_msg(record))

    async def episode(self, goal, key: EpisodeKey) -> EpisodeRecord:
        suite = SuiteConfig.choice(goal.suite)(**values_of(goal.suite_options))
        if suite.privileged_scene or suite.in_process:
            raise ValueError(f"arm_policy runs suites of a physical arm (so101_hardware), not {suite.type!r}")
        policy = self.policy(goal, suite)
        try:
            return await self.run(goal, key, suite, policy)
        finally:
            policy.close()  # what the episode holds (a chunked policy's inference thread); the policy stays cached
            if self.rollouts is not None:
                self.rollouts.discard()  # the frames of an episode not saved (an infrastructure failure)

    async def run(self, goal, key: EpisodeKey, suite, policy) -> EpisodeRecord:
        reads_scene = PolicyConfig.choice(goal.policy_type).needs_scene
        if reads_scene and not suite.knows_objects:
            raise ValueError(f"policy {goal.policy_type} reads object positions, which the suite does not know as "
                             f"configured{suite.setup_hint()}")
        info = suite.episode_info(key.task_id, key.perturbation) if reads_scene else {}
        if reads_scene:  # the controller's IK model is compiled now (seconds), not in the first control tick
            info["pick_place"](*info["goal"])
        period = 1.0 / suite.control_rate_hz
        cameras = sorted(set(self.record_cameras) | set(policy.checkpoint.cameras
                                                        if isinstance(policy, So101ChunkedPolicy) else ()))
        if self.rollout_root and self.rollouts is None:
            self.rollouts = RolloutStore(Path(self.rollout_root), suite.control_rate_hz, self.camera_sizes,
                                         self.rollout_repo_id)
        timings = {}
        started = time.monotonic()
        start_error, error = await self.home(suite, period)
        timings["home"] = time.monotonic() - started

        prompt, perturbation = suite.scene_card(key.task_id, key.perturbation)
        self.confirms.clear()
        self.verdicts.clear()
        self.say(f"confirm {scene_card(goal.episode, key, prompt, perturbation, suite.blind)} -- set the scene, "
                 f"then publish start on eval/confirm{self.or_keys}")
        t = time.monotonic()
        while not (self.confirms and self.confirms.popleft() == "start"):
            await sleep(self, 0.05)
        timings["confirm_wait"] = time.monotonic() - t

        self.say(f"running episode {goal.episode} (stop: publish stop on eval/confirm{self.or_keys})")
        max_steps = int(goal.max_steps) or suite.max_steps
        source = PerceivedGraph(self) if suite.perception else NoGraph()
        engine = Episode(key, policy, ContextMode.choice(key.mode)(), source, load_ontology(suite.ontology),
                         view=goal.view, max_steps=max_steps, info=info)
        self.task_pub.publish(String(data=prompt))
        t = time.monotonic()
        stopped_by = "time limit"
        scene = (lambda: self.perceived(prompt)) if reads_scene else (lambda: None)  # noqa: E731
        if self.rollouts is not None:
            self.rollouts.begin(prompt)
        engine.start(prompt, Step(self.observation(prompt, cameras), scene()))
        next_tick = time.monotonic()
        while not engine.done:
            observation = self.observation(prompt, cameras)
            action = engine.act(Step(observation, scene()))
            if action is None:  # the policy gave up: the operator still gives the verdict
                stopped_by = f"policy gave up: {engine.gave_up}"
                break
            # the pick-and-place controller's goals are radians (URDF joints); other policies act in the arm's units
            if reads_scene:
                sent = from_radians(JOINTS, action)
            else:
                sent = dict(zip(JOINTS, (float(a) for a in action), strict=True))
            self.command(sent)
            if self.rollouts is not None:
                self.rollouts.add(dict(zip(JOINTS, observation.raw["agent_pos"])), sent, observation.raw["pixels"])
            next_tick += period
            await sleep(self, max(next_tick - time.monotonic(), 0.001))
            operator_stop = "stop" in self.confirms or bool(self.verdicts)
            if operator_stop:
                stopped_by = "operator"
            engine.observe(False, operator_stop)
        timings["run"] = time.monotonic() - t

        t = time.monotonic()
        self.say(f"verdict episode {goal.episode}: {engine.steps} steps ({stopped_by}); publish "
                 f"success|failure|invalid [note] on eval/verdict{self.or_keys}")
        while not self.verdicts:
            await sleep(self, 0.05)
        verdict = self.verdicts.popleft()
        timings["verdict_wait"] = time.monotonic() - t
        record = engine.record(perturbation_applied=perturbation, home_start_error_deg=round(start_error, 3),
                               **verdict_facts(verdict, stopped_by, error, timings))
        record.success = verdict.success
        note = f": {verdict.note}" if verdict.note else ""
        record.failure_reason = "" if verdict.success else f"operator verdict {verdict.outcome}{note}"
        if verdict.outcome == "invalid":
            record.infra_failure = f"the operator marked the episode invalid{note}"
        if self.rollouts is not None:
            facts = {**key._asdict(), "episode": int(goal.episode), "verdict": verdict.outcome,
                     "operator_note": verdict.note, "valid": verdict.outcome != "invalid"}
            try:
                record.extra.update(await self.in_thread(self.rollouts.save, facts))
            except RecordingError as e:  # no replayable rollout: run it again
                record.infra_failure = f"the rollout could not be saved: {e}"
        self.say(f"recorded episode {goal.episode}: {verdict.outcome}{note}")
        return record

    def observation(self, prompt: str, cameras=()) -> Observation:
        """The arm now: joints in LeRobot units (``agent_pos``, JOINTS order) and the cameras' newest images."""
        positions = self.present()
        raw = {"agent_pos": np.array([positions[j] for j in JOINTS], dtype=np.float64),
               "pixels": {camera: self.image(camera) for camera in cameras}}
        return Observation({}, {}, raw, prompt)

    async def in_thread(self, work, *args):
        """``work(*args)`` in a thread of its own (a rollout's save encodes video for seconds), awaited without
        blocking the executor: joint states and the operator's input keep coming in meanwhile."""
        box: dict = {}

        def run():
            try:
                box["value"] = work(*args)
            except BaseException as e:  # noqa: BLE001 - raised here, in the episode
                box["error"] = e

        thread = threading.Thread(target=run, name="rollout-save")
        thread.start()
        while thread.is_alive():
            await sleep(self, 0.02)
        if "error" in box:
            raise box["error"]
        return box["value"]

    async def home(self, suite, period: float) -> tuple[float, float]:
        """Drive to the home pose at bounded speed; (the error it started from, the error once within tolerance),
        degrees: the largest joint's."""
        deadline = time.monotonic() + suite.home_timeout_s
        start_error = None
        while True:
            try:
                present = self.present()
            except InfrastructureFailure:
                if time.monotonic() > deadline:
                    raise
                await sleep(self, 0.05)
                continue
            error = home_error(suite.home, present)
            start_error = error if start_error is None else start_error
            if error <= suite.home_tolerance_deg:
                return start_error, error
            if time.monotonic() > deadline:
                raise InfrastructureFailure(f"home pose not reached within home_timeout_s={suite.home_timeout_s:g} "
                                            f"(largest joint error {error:.1f} deg)")
            self.command(home_goal(suite.home, present, self.safety, suite.home_step_deg))
            await sleep(self, period)


def main(args=None):
    raise SystemExit(run_node(ArmPolicy, args))


if __name__ == "__main__":
    main()
