"""vla_policy: a sgvla policy (scripted expert, prompt-grounded, LeRobot VLAs) on topics.

Subscribes to the episode the evaluator runs (`eval/episode`: policy, context mode, view), the simulator
state (`sim/state`: the task, the robot's joint and end-effector state, and for scripted policies the
privileged scene), the live graph context of the episode's view (`graph_context/<view>`) and, for learned
policies, the camera images. Composes the prompt per context mode and steps the policy exactly as the
in-process loop does (`sgvla.nodegraph.episode.PolicySession`), publishes `action`, the composed `prompt`,
and at the end of each episode a `policy/report` with the prompt's token budget use and the decision.

Lock-step (`lockstep: true`): acts on step k only with the state, graph (and images) of step k, once.
Free-running: acts on the newest state with the newest graph it has.
"""

import importlib
import traceback
from collections import OrderedDict

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import Image

from sgvla.nodegraph.episode import EpisodeSpec, PolicySession, decision_json, make_policy, raw_observation
from sgvla.policies.registry import PolicySpec
from sgvla.scene_graph import load_ontology
from sgvla_interfaces.msg import Action, GraphContext, PolicyReport, PromptContext, SimState
from sgvla_interfaces.msg import EpisodeSpec as EpisodeSpecMsg
from sgvla_ros.graph_io import payload_of, stamp_key, stored_image_of, view_graph_of
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import run_node

KEEP = 64  # buffered messages per kind


def spec_of(msg: EpisodeSpecMsg) -> EpisodeSpec:
    policy = PolicySpec(type=msg.policy_type, path=msg.policy_path or None, device=msg.policy_device or "cpu",
                        max_prompt_tokens=None if msg.max_prompt_tokens < 0 else int(msg.max_prompt_tokens),
                        name=msg.policy or None)
    return EpisodeSpec(int(msg.episode), policy, msg.policy, int(msg.task_id), msg.perturbation, msg.mode,
                       int(msg.seed), int(msg.image_size), msg.view, msg.context_style, msg.graph_source)


class VLAPolicy(Node):
    def __init__(self, **kwargs):
        super().__init__("vla_policy", **kwargs)
        self.declare_parameter("lockstep", True)
        self.declare_parameter("ontology", "libero_spatial")
        self.declare_parameter("preload", ["sgvla.policies.scripted", "sgvla.libero.expert"])  # modules imported now
        self.declare_parameter("cameras", ["agentview", "robot0_eye_in_hand"])  # image topics a learned policy reads
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        for module in param("preload"):
            if module:
                importlib.import_module(module)
        self.lockstep = bool(param("lockstep"))
        self.cameras = [c for c in param("cameras") if c]
        self.ontology = load_ontology(param("ontology"))
        self.specs: OrderedDict[int, EpisodeSpec] = OrderedDict()
        self.states: OrderedDict[tuple[int, int], SimState] = OrderedDict()
        self.graphs: OrderedDict[tuple[int, int], GraphContext] = OrderedDict()
        self.images: OrderedDict[int, dict[str, Image]] = OrderedDict()
        self.policies: dict = {}
        self.session: PolicySession | None = None
        self.finished: set[int] = set()
        self.last_action: Action | None = None
        self.last_prompt = None
        self.graph_subs: dict = {}
        self.image_subs: dict = {}
        self.action_pub = self.create_publisher(Action, "action", QOS["control"])
        self.prompt_pub = self.create_publisher(PromptContext, "prompt", QOS["reliable"])
        self.report_pub = self.create_publisher(PolicyReport, "policy/report", QOS["control"])
        self.create_subscription(EpisodeSpecMsg, "eval/episode", self.on_spec, QOS["control"])
        self.create_subscription(SimState, "sim/state", self.on_state, QOS["control"])
        self.get_logger().info(f"ready ({'lock-step' if self.lockstep else 'free-running'})")

    # -- inputs -----------------------------------------------------------------------------------

    def on_spec(self, msg: EpisodeSpecMsg):
        spec = spec_of(msg)
        self._keep(self.specs, spec.episode, spec)
        if spec.view not in self.graph_subs:
            self.graph_subs[spec.view] = self.create_subscription(
                GraphContext, f"graph_context/{spec.view}", lambda m, v=spec.view: self.on_graph(v, m), QOS["control"])
        if spec.needs_images:  # before the reset: frames are not kept for late subscribers
            self._subscribe_images(self.cameras)
        self.process()

    def on_state(self, msg: SimState):
        key = (msg.episode, msg.step)
        if msg.episode in self.finished:
            return
        if self.last_action is not None and (self.last_action.episode, self.last_action.step) == key:
            self.action_pub.publish(self.last_action)  # the state came again: the action may have been missed
            return
        self._keep(self.states, key, msg)
        self.process()

    def on_graph(self, view: str, msg: GraphContext):
        spec = self.specs.get(msg.episode)
        if spec is None or spec.view == view:
            self._keep(self.graphs, (msg.episode, msg.step), msg)
            self.process()

    def on_image(self, camera: str, msg: Image):
        self.images.setdefault(stamp_key(msg.header.stamp), {})[camera] = msg
        while len(self.images) > KEEP:
            self.images.popitem(last=False)
        self.process()

    @staticmethod
    def _keep(store: OrderedDict, key, value) -> None:
        store[key] = value
        while len(store) > KEEP:
            store.popitem(last=False)

    # -- acting -----------------------------------------------------------------------------------

    def process(self):
        pending = [k for k in self.states if k[0] not in self.finished and k[0] in self.specs]
        if not pending:
            return
        episode = max(k[0] for k in pending)
        spec = self.specs[episode]
        if self.session is None or self.session.spec.episode != episode:
            if self.session is not None and self.session.spec.episode not in self.finished:
                self.report(self.session, error="superseded by a newer episode")
            if not self._start(spec):
                return
        session = self.session
        steps = sorted(s for e, s in self.states if e == episode)
        if self.lockstep:
            step = session.steps
            if step not in steps:
                return
        else:
            step = steps[-1]
            if step < session.steps:
                return
        state = self.states[(episode, step)]
        if state.done:
            self.report(session)
            return
        graph = self._graph(episode, step, session)
        if session.needs_graph(step) and graph is None:
            return
        payload = payload_of(state)
        images = None
        if spec.needs_images and payload["has_pixels"]:
            images = self._images(state, payload)
            if images is None:
                return
        try:
            vg = view_graph_of(graph) if graph is not None else None
            observation = raw_observation(payload, images or {})
            action = session.act(step, state.task, observation, payload["scene"], payload["info"], vg,
                                 graph.compute_ms / 1000 if graph is not None else 0.0)
        except Exception as exc:
            self.get_logger().error(f"episode {episode} step {step}: {exc!r}\n{traceback.format_exc()}")
            self.report(session, error=f"{type(exc).__name__}: {exc}")
            return
        msg = Action(header=state.header, episode=episode, step=step)
        msg.data = [float(x) for x in action]
        self.last_action = msg
        self.action_pub.publish(msg)
        self._publish_prompt(session, state, step)
        for key in [k for k in self.states if k[0] == episode and k[1] <= step]:
            del self.states[key]

    def _start(self, spec: EpisodeSpec) -> bool:
        try:
            if spec.graph_source != "ground_truth":
                raise ValueError(f"graph_source {spec.graph_source!r} is not served over topics")
            if spec.policy_name not in self.policies:
                self.policies[spec.policy_name] = make_policy(spec.policy, self.ontology, spec.image_size)
        except Exception as exc:
            self.get_logger().error(f"episode {spec.episode}: cannot make policy {spec.policy_name}: {exc!r}")
            self.session = PolicySession(spec, None, self.ontology)
            self.report(self.session, error=f"{type(exc).__name__}: {exc}")
            return False
        self.session = PolicySession(spec, self.policies[spec.policy_name], self.ontology)
        self.last_prompt = None
        return True

    def _graph(self, episode: int, step: int, session: PolicySession) -> GraphContext | None:
        if self.lockstep or step == 0:
            return self.graphs.get((episode, step))
        steps = [s for e, s in self.graphs if e == episode and s <= step]
        return self.graphs[(episode, max(steps))] if steps else None

    def _images(self, state: SimState, payload) -> dict[str, np.ndarray] | None:
        cameras = list(payload["pixel_keys"])
        self._subscribe_images(cameras)
        if self.lockstep:
            frames = self.images.get(stamp_key(state.header.stamp), {})
        else:
            frames = {}
            for key in sorted(self.images, reverse=True):
                for camera, msg in self.images[key].items():
                    frames.setdefault(camera, msg)
        if not all(c in frames for c in cameras):
            return None
        return {c: stored_image_of(frames[c]) for c in cameras}

    def _subscribe_images(self, cameras: list[str]) -> None:
        for camera in cameras:
            if camera not in self.image_subs:
                qos = QOS["frames"] if self.lockstep else QOS["sensor"]
                self.image_subs[camera] = self.create_subscription(
                    Image, f"camera/{camera}/image_raw", lambda m, c=camera: self.on_image(c, m), qos)

    # -- outputs ----------------------------------------------------------------------------------

    def _publish_prompt(self, session: PolicySession, state: SimState, step: int):
        context = session.context
        if context is None or context.prompt == self.last_prompt:
            return
        self.last_prompt = context.prompt
        task = state.task
        block = context.prompt[len(task) + 1:] if context.prompt.startswith(task + "\n") else ""
        self.prompt_pub.publish(PromptContext(
            header=state.header, task=task, mode=session.spec.mode, context=block, prompt=context.prompt,
            episode=session.spec.episode, step=step, view=session.spec.view,
            triplets_in_prompt=context.triplets_in_prompt))

    def report(self, session: PolicySession, error: str = ""):
        spec = session.spec
        self.finished.add(spec.episode)
        msg = PolicyReport(episode=spec.episode, policy=spec.policy_name, mode=spec.mode, error=error)
        msg.header.stamp = self.get_clock().now().to_msg()
        if session.policy is not None and not error:
            r = session.report()
            budget = r["budget"]
            msg.steps_acted = r["steps_acted"]
            msg.prompt = r["prompt"]
            msg.has_budget = budget is not None
            if budget is not None:
                msg.prompt_tokens = int(budget.tokens)
                msg.prompt_budget = -1 if budget.budget is None else int(budget.budget)
                msg.triplets_total = int(budget.triplets_total)
                msg.triplets_kept = int(budget.triplets_kept)
                msg.prompt_truncated = bool(budget.truncated)
            msg.triplets_in_prompt = int(r["triplets_in_prompt"])
            msg.graph_triplets = int(r["graph_triplets"])
            msg.visible_objects = list(r["visible_objects"])
            msg.context_ms_per_step = 1000 * r["context_s"] / max(r["steps_acted"] - 1, 1)
            msg.decision_json = decision_json(r["decision"])
        self.report_pub.publish(msg)
        for store in (self.states, self.graphs):
            for key in [k for k in store if k[0] <= spec.episode]:
                del store[key]


def main(args=None):
    raise SystemExit(run_node(VLAPolicy, args))


if __name__ == "__main__":
    main()
