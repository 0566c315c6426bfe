"""so101_policy: a LeRobot checkpoint trained on SO101 data drives the arm (or its twin) over the hardware topics.

Reads ``joint_states`` (radians) and ``<camera>/image_raw`` (rgb8) of the cameras the checkpoint's features name,
maps them to the dataset's features and units (`sgvla.so101.learned`: degrees, gripper 0..100 %, images resized
to the features' shapes), and publishes one goal per control period on ``joint_commands`` (radians), where the
arm node (or the twin node, the same code) passes it through the arm's safety layer (joint limits, bounded step
from the present position, hold when commands stop). Chunks are computed in a background thread while the current
chunk plays (`ChunkedActor`): inference slower than a control period does not slow the command stream; when no
chunk covers a step the last goal is sent again. The prompt is the ``prompt`` parameter, else the latched
``task`` topic (the twin publishes its task's), and goes where the checkpoint's processor expects the task.
``min_inference_s`` pads each inference to at least that long (tests and benchmarks of a slow policy).
Every 5 s it logs its chunks; while an input a chunk needs has not come, it warns which topics it has not heard
from and how many publishers each has (0: nothing publishes it; 1 or more: discovered, yet nothing arrived).
"""

from sensor_msgs.msg import Image, JointState
from sgvla_interfaces.msg import SceneGraph
from sgvla_ros.graph_io import upright_image_of
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import ResourceNode, positive_parameter, run_node
from sgvla_ros.so101_arm import joint_state
from std_msgs.msg import String

import sgvla.plugins  # noqa: F401  (registers the context modes)
from sgvla.core.context import ContextInputs, ContextMode
from sgvla.scene_graph import Graph, ViewGraph, load_ontology
from sgvla.so101.arm_suite import So101HardwareSuite
from sgvla.so101.cameras import AGENTVIEW
from sgvla.so101.hardware.joints import from_radians
from sgvla.so101.learned import ChunkedActor, So101Checkpoint, So101LeRobotPolicy, So101Observation


class SO101Policy(ResourceNode):
    def __init__(self, **kwargs):
        super().__init__("so101_policy", **kwargs)
        self.declare_parameter("policy_path", "")  # a LeRobot checkpoint directory (or hub id) trained on SO101 data
        self.declare_parameter("device", "cpu")
        self.declare_parameter("prompt", "")  # empty: the `task` topic's
        self.declare_parameter("rate_hz", 30.0)  # the control rate (the rig's control_rate_hz, the dataset's fps)
        self.declare_parameter("refill_at", 0.5)  # ask for the next chunk when this share of the current one is left
        self.declare_parameter("min_inference_s", 0.0)  # pad each inference to at least this long
        # context mode: standard, scene_graph, scene_graph_full, or a control (filler, wrong_graph, shuffled_graph)
        self.declare_parameter("mode", "standard")
        self.declare_parameter("seed", 0)  # seeds the controls' text (filler words, shuffled names)
        self.declare_parameter("view", AGENTVIEW)  # the camera whose scene graph the prompt carries
        self.declare_parameter("ontology", So101HardwareSuite.ontology)  # object names of the graph
        self.declare_parameter("context_style", "reference")  # how the graph is written into the prompt
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        if not param("policy_path"):
            raise ValueError("so101_policy: policy_path is required (a LeRobot checkpoint trained on SO101 data)")
        rate_hz = positive_parameter(self, "rate_hz")
        self.mode = ContextMode.choice(param("mode"))()
        if self.mode.needs_boxes:
            raise ValueError(f"so101_policy: mode {param('mode')} needs boxes, which scene_graph/<view> does not "
                             "carry; use standard, scene_graph or scene_graph_full")
        self.view, self.style = param("view"), param("context_style")
        self.ontology = load_ontology(param("ontology"))
        self.graph: ViewGraph | None = None
        self.checkpoint = So101Checkpoint(param("policy_path"), device=param("device"),
                                          min_inference_s=param("min_inference_s"))
        # Controls match the graph block's length in the checkpoint's own tokens (words when it has no language input).
        meter = So101LeRobotPolicy(self.checkpoint, "so101_policy").meter
        self.inputs = ContextInputs(seed=param("seed"),
                                    count_tokens=None if meter is None else lambda text: meter.budget(text).tokens)
        self.refill_at = param("refill_at")
        self.prompt = param("prompt")
        self.actor: ChunkedActor | None = None
        self.positions = None
        self.images: dict = {}
        self.step = 0
        # by topic name as given (relative: a launch namespace applies), for the report of what has not come
        self.inputs = {"joint_states": self.create_subscription(JointState, "joint_states", self.on_joints,
                                                                QOS["sensor"])}
        for camera in self.checkpoint.cameras:
            self.inputs[f"{camera}/image_raw"] = self.create_subscription(
                Image, f"{camera}/image_raw", lambda m, c=camera: self.images.__setitem__(c, m), QOS["sensor"])
        self.inputs["task"] = self.create_subscription(String, "task", self.on_task, QOS["latched"])
        if self.mode.uses_graph:
            self.inputs[f"scene_graph/{self.view}"] = self.create_subscription(
                SceneGraph, f"scene_graph/{self.view}", self.on_graph, QOS["reliable"])
        self.command_pub = self.create_publisher(JointState, "joint_commands", QOS["commands"])
        self.create_timer(1.0 / rate_hz, self.tick)
        self.create_timer(5.0, self.report)
        self.get_logger().info(f"{self.checkpoint.type} from {self.checkpoint.path}: cameras "
                               f"{dict(self.checkpoint.cameras)}, {rate_hz:g} Hz")

    def on_joints(self, msg: JointState) -> None:
        try:
            self.positions = from_radians(msg.name, msg.position)
        except ValueError as e:
            self.get_logger().error(f"joint_states: {e}", throttle_duration_sec=2.0)

    def on_task(self, msg: String) -> None:
        if not self.prompt:
            self.prompt = msg.data

    def on_graph(self, msg: SceneGraph) -> None:
        graph = Graph.of([(t.subject, t.relation, t.object) for t in msg.triplets])
        self.graph = ViewGraph(msg.camera, graph, {})

    def composed_prompt(self) -> str | None:
        """The prompt of this step (None while the mode waits for its first graph)."""
        if self.mode.uses_graph and self.graph is None:
            return None
        return self.mode.context(self.prompt, self.graph, self.view, self.ontology, self.style, self.inputs).prompt

    def observe(self) -> So101Observation | None:
        if self.positions is None or any(c not in self.images for c in self.checkpoint.cameras):
            return None
        return So101Observation(dict(self.positions), {c: upright_image_of(m) for c, m in self.images.items()})

    def tick(self) -> None:
        prompt = self.composed_prompt() if self.prompt else None
        if not self.context.ok() or prompt is None or self.positions is None:
            return
        if self.actor is None:
            self.actor = self.own(ChunkedActor(self.checkpoint, prompt, self.refill_at))
            self.get_logger().info(f"prompt: {prompt!r}")
        self.actor.task = prompt
        goal = self.actor.tick(self.step, self.observe)
        self.step += 1
        if goal is not None:
            self.command_pub.publish(joint_state(self, goal))

    def missing_inputs(self) -> list[str]:
        """The topics this node has not yet heard from that a chunk needs, with how many publishers each has."""
        topics = ["joint_states"] if self.positions is None else []
        topics += [f"{c}/image_raw" for c in self.checkpoint.cameras if c not in self.images]
        topics += ["task"] if not self.prompt else []
        topics += [f"scene_graph/{self.view}"] if self.mode.uses_graph and self.graph is None else []
        return [f"{t} ({self.inputs[t].get_publisher_count()} publisher(s))" for t in topics]

    def report(self) -> None:
        missing = self.missing_inputs()
        if missing:  # no chunk can be computed: say what it waits for, not just "0 chunks"
            self.get_logger().warning(f"step {self.step}: waiting for {', '.join(missing)}")
        if self.actor is None:
            return
        stats = self.actor.stats
        mean = sum(stats.inference_s) / max(len(stats.inference_s), 1)
        self.get_logger().info(f"step {self.step}: {stats.chunks} chunks, inference {1000 * mean:.0f} ms mean, "
                               f"{stats.held} steps held, {stats.skipped} goals skipped")


def main(args=None):
    raise SystemExit(run_node(SO101Policy, args))


if __name__ == "__main__":
    main()
