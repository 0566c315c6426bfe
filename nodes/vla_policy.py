"""vla_policy: runs evaluation episodes (the `run_episode` action) with the episode engine, over a robot's topics.

A goal is an episode spec (policy and options, task, perturbation, context mode, seed, view, suite). The node
resets the environment (`reset_episode`), then for every step reads what a robot has (`joint_states`, `eef_pose`,
camera images, for learned policies) and what the policy declares it needs beyond that (the privileged
`sim/scene` for scripted policies), plus the live graph of the episode's view (`graph_context/<view>`), and
steps `sgvla.core.episode.Episode`, the engine `sgvla eval` runs in process: the prompt per context mode, the
policy, the record. It publishes `action`s (keyed by episode and step), the composed `prompt`, feedback per
step, and returns the record as the action's result. Lock-step (`lockstep: true`): acts on step k only with
the inputs of step k, once. Free-running: acts on the newest step it has. A component that fails (the
environment's reset or step, inputs that stop coming) ends the episode with a record marked as an
infrastructure failure, never as the policy's failure.

Progress: where the suite has stages (`SuiteConfig.stages`), the node reads `sim/scene` for every policy, the last
step's included, and gives the engine the scenes `sgvla eval` gives it in process, at the same steps (a learned
policy's steps carry them too, as in process; it reads none). The record's progress fields ride in its `extra`
(the message has no fields for them).
"""

from collections import OrderedDict

from geometry_msgs.msg import PoseStamped
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.task import Future
from sensor_msgs.msg import Image, JointState

import sgvla.plugins  # noqa: F401  (registers suites, policies, context modes, graph sources)
from sgvla.core.context import ContextMode
from sgvla.core.episode import Episode, EpisodeKey, EpisodeRecord, InfrastructureFailure
from sgvla.core.mid_episode import TRIGGERS_KEY
from sgvla.core.protocols import Step
from sgvla.core.state import Observation
from sgvla.eval.config import default_suite
from sgvla.eval.suite import SuiteConfig
from sgvla.nodegraph.graph_sources import TopicGraphSource
from sgvla.policies.registry import PolicyConfig
from sgvla.policies.session import PolicySession
from sgvla.scene_graph import load_ontology
from sgvla_interfaces.action import RunEpisode
from sgvla_interfaces.msg import Action, GraphContext, PromptContext, StepStatus
from sgvla_interfaces.msg import SceneState as SceneStateMsg
from sgvla_interfaces.srv import ResetEpisode
from sgvla_ros.graph_io import stamp_key, stored_image_of, upright_image_of, view_graph_of
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import ResourceNode, run_node
from sgvla_ros.state_io import record_msg, robot_of, scene_of, values_of

KEEP = 64  # buffered messages per kind


class VLAPolicy(ResourceNode):
    live_parameters = frozenset({"reset_timeout_s", "step_timeout_s"})  # read each time they are used: `ros2 param set` takes effect

    def __init__(self, **kwargs):
        super().__init__("vla_policy", **kwargs)
        self.declare_parameter("lockstep", True)
        self.declare_parameter("preload", list(default_suite().policy_modules) or [""])  # modules imported now, not at the first step
        self.declare_parameter("cameras", list(default_suite().rendered()))  # image topics a learned policy reads
        self.declare_parameter("reset_timeout_s", 900.0)  # a reset may build a simulator
        self.declare_parameter("step_timeout_s", 120.0)  # no input of the current step for this long: infra failure
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        import importlib

        for module in param("preload"):
            if module:
                importlib.import_module(module)
        self.lockstep = bool(param("lockstep"))
        self.cameras = [c for c in param("cameras") if c]
        self.inputs: dict[str, OrderedDict] = {k: OrderedDict() for k in ("status", "scene", "joints", "eef", "graph")}
        self.images: OrderedDict[int, dict[str, Image]] = OrderedDict()  # stamp -> camera -> image
        self.policies = self.own(PolicySession())  # closed with the node
        self.graph_subs: dict = {}
        self.image_subs: dict = {}
        self.waiter: Future | None = None
        self.action_pub = self.create_publisher(Action, "action", QOS["control"])
        self.prompt_pub = self.create_publisher(PromptContext, "prompt", QOS["reliable"])
        self.create_subscription(StepStatus, "sim/status", lambda m: self.on_input("status", m), QOS["control"])
        self.create_subscription(SceneStateMsg, "sim/scene", lambda m: self.on_input("scene", m), QOS["control"])
        self.create_subscription(JointState, "joint_states", lambda m: self.on_input("joints", m), QOS["control"])
        self.create_subscription(PoseStamped, "eef_pose", lambda m: self.on_input("eef", m), QOS["control"])
        self.reset_client = self.create_client(ResetEpisode, "reset_episode")
        # An episode is one coroutine; in a group of its own it never blocks the inputs it awaits.
        self.server = ActionServer(self, RunEpisode, "run_episode", execute_callback=self.execute,
                                   goal_callback=self.on_goal, cancel_callback=lambda _: CancelResponse.ACCEPT,
                                   callback_group=ReentrantCallbackGroup())
        self.busy = False
        self.view = ""
        self.get_logger().info(f"ready ({'lock-step' if self.lockstep else 'free-running'})")

    # -- inputs -----------------------------------------------------------------------------------

    def on_input(self, kind: str, msg) -> None:
        store = self.inputs[kind]
        key = (msg.episode, msg.step) if kind in ("status", "scene", "graph") else stamp_key(msg.header.stamp)
        store[key] = msg
        while len(store) > KEEP:
            store.popitem(last=False)
        self._wake()

    def on_image(self, camera: str, msg: Image) -> None:
        self.images.setdefault(stamp_key(msg.header.stamp), {})[camera] = msg
        while len(self.images) > KEEP:
            self.images.popitem(last=False)
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(True)

    def _subscribe(self, view: str, learned: bool) -> None:
        if view not in self.graph_subs:
            self.graph_subs[view] = self.create_subscription(
                GraphContext, f"graph_context/{view}", lambda m, v=view: self.on_graph(v, m), QOS["control"])
        if learned:  # before the reset: frames are not kept for late subscribers
            for camera in self.cameras:
                if camera not in self.image_subs:
                    self.image_subs[camera] = self.create_subscription(
                        Image, f"camera/{camera}/image_raw", lambda m, c=camera: self.on_image(c, m), QOS["frames"])

    def on_graph(self, view: str, msg: GraphContext) -> None:
        if view == self.view:
            self.on_input("graph", msg)

    async def wait_for(self, ready, what: str, timeout_s: float):
        """Await until `ready()` returns a value (not None); InfrastructureFailure after `timeout_s`."""
        deadline = self.get_clock().now().nanoseconds + int(timeout_s * 1e9)
        while (value := ready()) is None:
            if self.get_clock().now().nanoseconds > deadline:
                raise InfrastructureFailure(f"no {what} within {timeout_s:g} s")
            self.waiter = Future()
            timer = self.create_timer(0.1, self._wake)
            try:
                await self.waiter
            finally:
                self.destroy_timer(timer)
                self.waiter = None
        return value

    # -- the action -------------------------------------------------------------------------------

    def on_goal(self, goal) -> GoalResponse:
        return GoalResponse.REJECT if self.busy else GoalResponse.ACCEPT

    def policy(self, goal, suite):
        config = PolicyConfig.choice(goal.policy_type)(**values_of(goal.policy_options))
        return config, self.policies.get(config, suite)

    async def execute(self, goal_handle):
        goal = goal_handle.request
        self.busy = True
        episode = None
        facts: dict = {}
        try:
            suite = SuiteConfig.choice(goal.suite)(**values_of(goal.suite_options))
            config, policy = self.policy(goal, suite)
            mode = ContextMode.choice(goal.mode)()
            self.view = goal.view
            self._subscribe(goal.view, config.learned)
            key = EpisodeKey(goal.policy, int(goal.task_id), goal.perturbation, goal.mode, int(goal.seed))
            source = TopicGraphSource(goal.graph_source)
            response = await self.reset(goal, suite)
            facts = {"perturbation_applied": response.perturbation_applied, **values_of(response.episode_facts)}
            info = {"pick_place": suite.controller_factory()}
            if TRIGGERS_KEY in facts:  # mid-episode changes: the engine records when they fire, as in process
                info[TRIGGERS_KEY] = str(facts[TRIGGERS_KEY])
            episode = Episode(key, policy, mode, source, load_ontology(suite.ontology), view=goal.view,
                              max_steps=int(response.max_steps), style=goal.context_style, info=info,
                              stages=suite.stages(int(goal.task_id)))
            await self.run(goal, goal_handle, episode, suite, config, response)
            record = episode.record(**facts)
        except InfrastructureFailure as exc:
            self.get_logger().error(f"episode {goal.episode}: {exc}")
            record = (episode.record_failure(exc, **facts) if episode is not None
                      else self._failed(goal, exc, facts))
        except Exception as exc:  # a bad spec or a policy that raised: the episode has no result either
            self.get_logger().error(f"episode {goal.episode}: {type(exc).__name__}: {exc}")
            record = (episode.record_failure(exc, **facts) if episode is not None
                      else self._failed(goal, exc, facts))
        finally:
            self.busy = False
        goal_handle.succeed()
        return RunEpisode.Result(record=record_msg(record))

    @staticmethod
    def _failed(goal, exc, facts):
        key = EpisodeKey(goal.policy, int(goal.task_id), goal.perturbation, goal.mode, int(goal.seed))
        return EpisodeRecord.not_started(key, exc, goal.max_steps, view=goal.view, graph_source=goal.graph_source,
                                         extra=facts)

    async def reset(self, goal, suite):
        if not self.reset_client.wait_for_service(timeout_sec=0.0):
            await self.wait_for(lambda: True if self.reset_client.service_is_ready() else None,
                                "reset_episode service", self.get_parameter("reset_timeout_s").value)
        request = ResetEpisode.Request(episode=goal.episode, suite=goal.suite, suite_options=goal.suite_options,
                                       task_id=goal.task_id, perturbation=goal.perturbation, seed=goal.seed,
                                       max_steps=goal.max_steps, render_images=goal.render_images)
        future = self.reset_client.call_async(request)
        response = await self.wait_for(lambda: future.result() if future.done() else None, "reset",
                                       self.get_parameter("reset_timeout_s").value)
        if not response.ok:
            raise InfrastructureFailure(f"reset failed: {response.message}")
        return response

    def step_inputs(self, goal, config, suite, cameras, step: int, scened: bool):
        """The inputs of (episode, step) once all have arrived, else None; the scene (its message) with `scened`."""
        e = goal.episode
        status = self.inputs["status"].get((e, step))
        if status is None:
            return None
        if status.error:
            raise InfrastructureFailure(f"the environment failed at step {step}: {status.error}")
        scene = self.inputs["scene"].get((e, step)) if scened else True
        if status.done and step > 0:  # the last step: its scene (for progress), nothing to act on
            return None if scene is None else (status, scene, None, None)
        graph = self.inputs["graph"].get((e, step))
        if graph is None or scene is None:
            return None
        observation = Observation({}, {}, {}, status.task)
        if config.learned:
            stamp = stamp_key(status.header.stamp)
            frames, joints = self.images.get(stamp, {}), self.inputs["joints"].get(stamp)
            if joints is None or any(c not in frames for c in cameras):
                return None
            image_of = stored_image_of if suite.images_rotated_180 else upright_image_of  # as the backend stores them
            images = {c: image_of(frames[c]) for c in cameras}
            raw = suite.observation(robot_of(joints, self.inputs["eef"].get(stamp)), images)
            observation = Observation({}, images, raw, status.task)
        return status, scene, graph, observation

    async def run(self, goal, goal_handle, episode, suite, config, response):
        timeout = self.get_parameter("step_timeout_s").value
        cameras = [c for c in response.camera_names if c in self.cameras] if config.learned else []
        scened = config.needs_scene or episode.stages is not None  # the policy reads the scene, or progress does
        step = 0
        while True:
            status, scene_msg, graph, observation = await self.wait_for(
                lambda s=step: self.step_inputs(goal, config, suite, cameras, s, scened), f"input of step {step}",
                timeout)
            if not self.lockstep:  # act on the newest step that has arrived
                newest = max((s for e, s in self.inputs["status"] if e == goal.episode), default=step)
                for skipped in range(step + 1, newest + 1):
                    later = self.step_inputs(goal, config, suite, cameras, skipped, scened)
                    if later is None:
                        break
                    episode.observe(False, False, self.scene_at(goal, episode.steps + 1) if scened else None)
                    step, (status, scene_msg, graph, observation) = skipped, later
            scene, facts = scene_of(scene_msg) if scened else (None, {})
            if step > 0 and episode.observe(status.success, status.done, scene):
                return
            episode.info.update(facts)
            episode.source.current = view_graph_of(graph)
            if step == 0:
                episode.start(status.task, Step(observation, scene), reference=episode.source.current)
            action = episode.act(Step(observation, scene))
            if action is None:  # the policy gave up: the episode is over, a failure with its reason
                return
            msg = Action(episode=goal.episode, step=step, data=action)
            msg.header.stamp = status.header.stamp
            self.action_pub.publish(msg)
            self.publish_prompt(goal, episode, step)
            goal_handle.publish_feedback(RunEpisode.Feedback(step=step, success=False,
                                                             context_ms=1000 * episode.context_s))
            step += 1

    def scene_at(self, goal, step: int):
        """The scene of (episode, step) as it arrived, or None."""
        msg = self.inputs["scene"].get((goal.episode, step))
        return None if msg is None else scene_of(msg)[0]

    def publish_prompt(self, goal, episode, step):
        prompt = episode.context.prompt
        if prompt == getattr(self, "_last_prompt", None):
            return
        self._last_prompt = prompt
        msg = PromptContext(task=episode.task, mode=goal.mode, context=prompt[len(episode.task):].lstrip("\n"),
                            prompt=prompt, episode=goal.episode, step=step, view=goal.view,
                            triplets_in_prompt=episode.context.triplets_in_prompt)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.prompt_pub.publish(msg)


def main(args=None):
    raise SystemExit(run_node(VLAPolicy, args))


if __name__ == "__main__":
    main()
