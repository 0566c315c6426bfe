"""evaluator: runs an evaluation plan (the same config files as `sgvla eval`) over the node graph.

For each (policy, task, perturbation, mode, seed) of the plan, in `sgvla eval`'s order, skipping those
already recorded: publishes the episode (`eval/episode`), calls `reset_episode`, watches `sim/state` until
success or the step limit and waits for the policy's `policy/report`, then appends the record (the keys
of the in-process loop) to `<output_dir>/episodes.jsonl` and publishes `eval/result`. At the end it writes
the report as `sgvla eval` does, a snapshot of the ROS graph (`ros_graph.json`), and exits: 0 when every
episode was recorded, 1 when some failed (rerun to retry them), 2 for a bad plan, 3 when the node graph
stopped answering (startup, reset or step timeout).
"""

import json
import time
from pathlib import Path

from rclpy.duration import Duration
from rclpy.node import Node

from sgvla.nodegraph.evaluation import TopicEvaluation, load_eval_config
from sgvla_interfaces.msg import EpisodeResult, PolicyReport, SimState
from sgvla_interfaces.msg import EpisodeSpec as EpisodeSpecMsg
from sgvla_interfaces.srv import ResetEpisode
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import NodeExit, run_node


class Evaluator(Node):
    def __init__(self, **kwargs):
        super().__init__("evaluator", **kwargs)
        self.declare_parameter("config", "config/eval/default.yaml")
        self.declare_parameter("overrides", "")  # key=value overrides, space-separated, as `sgvla eval` takes
        self.declare_parameter("output_dir", "")  # default: the plan's output_dir
        self.declare_parameter("wait_for_nodes", [""])  # node names that must be up before the first episode
        self.declare_parameter("wait_for_subscribers", [""])  # "topic:n": n subscriptions before the first episode
        self.declare_parameter("startup_timeout_s", 900.0)
        self.declare_parameter("reset_timeout_s", 900.0)  # a reset may build a simulator
        self.declare_parameter("step_timeout_s", 120.0)  # no state or report of the episode for this long
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        self.exit_code: int | None = None
        self.evaluation: TopicEvaluation | None = None
        try:
            cfg = load_eval_config(param("config"), param("overrides"), param("output_dir"))
            self.evaluation = TopicEvaluation(cfg)
        except Exception as exc:  # ConfigError, ValueError, FileNotFoundError: a bad plan
            self.get_logger().error(f"evaluator: {exc}")
            self.exit_code = 2
        self.wait_nodes = [n for n in param("wait_for_nodes") if n]
        self.wait_subs = [tuple(w.rsplit(":", 1)) for w in param("wait_for_subscribers") if w]
        self.spec_pub = self.create_publisher(EpisodeSpecMsg, "eval/episode", QOS["control"])
        self.result_pub = self.create_publisher(EpisodeResult, "eval/result", QOS["reliable"])
        self.create_subscription(SimState, "sim/state", self.on_state, QOS["control"])
        self.create_subscription(PolicyReport, "policy/report", self.on_report, QOS["control"])
        self.reset_client = self.create_client(ResetEpisode, "reset_episode")
        self.phase = "startup"
        self.started = time.monotonic()
        self.pending = None
        self.deadline = 0.0
        self.timer = self.create_timer(0.02, self.tick)

    # -- the run ----------------------------------------------------------------------------------

    def tick(self):
        if self.exit_code is not None:
            raise NodeExit(self.exit_code)
        now = time.monotonic()
        if self.phase == "startup":
            missing = self._not_ready()
            if not missing:
                ev = self.evaluation
                self.get_logger().info(f"node graph ready after {now - self.started:.1f} s; {len(ev.todo)} of "
                                       f"{ev.total} episodes to run -> {ev.results.path}")
                self.phase = "run"
            elif now - self.started > self.get_parameter("startup_timeout_s").value:
                self.get_logger().error(f"node graph not ready: {', '.join(missing)}")
                self.finish(3)
            return
        if self.pending is None:
            self.start_next()
        elif now > self.deadline:
            what = "reset" if self.pending.reset is None else "state or report"
            self.get_logger().error(f"episode {self.pending.episode}: no {what} in time; the node graph stopped")
            self.evaluation.fail(self.pending, f"timeout waiting for the {what}")
            self.pending = None
            self.finish(3)

    def _not_ready(self) -> list[str]:
        nodes = set(self.get_node_names())
        missing = [f"node {n}" for n in self.wait_nodes if n not in nodes]
        missing += [f"{t} ({self.count_subscribers(t)}/{n} subscribers)" for t, n in self.wait_subs
                    if self.count_subscribers(t) < int(n)]
        if not self.reset_client.service_is_ready():
            missing.append("service reset_episode")
        return missing

    def start_next(self):
        ev = self.evaluation
        pending = ev.start_next()
        if pending is None:
            self.finish(1 if ev.failed else 0)
            return
        self.pending = pending
        spec, episode = pending.spec, pending.episode
        msg = EpisodeSpecMsg(episode=spec.episode, policy=spec.policy_name, policy_type=spec.policy.type,
                             policy_path=spec.policy.path or "", policy_device=spec.policy.device,
                             max_prompt_tokens=-1 if spec.policy.max_prompt_tokens is None
                             else int(spec.policy.max_prompt_tokens),
                             task_id=spec.task_id, perturbation=spec.perturbation, mode=spec.mode, seed=spec.seed,
                             image_size=spec.image_size, view=spec.view, context_style=spec.context_style,
                             graph_source=spec.graph_source)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.spec_pub.publish(msg)
        settings = ev.settings(pending)
        request = ResetEpisode.Request(task_id=episode.task_id, seed=episode.seed, perturbation=episode.perturbation,
                                       episode=pending.number, max_steps=ev.cfg.max_steps or 0,
                                       render_profile=settings.render_profile, image_size=settings.image_size,
                                       render_images=settings.render_images)
        self.get_logger().info(f"[{ev.finished + ev.failed + 1}/{len(ev.todo) + ev.finished + ev.failed + 1}] "
                               f"episode {pending.number}: {episode}")
        self.deadline = time.monotonic() + self.get_parameter("reset_timeout_s").value
        future = self.reset_client.call_async(request)
        future.add_done_callback(lambda f, p=pending: self.on_reset(p, f))

    def on_reset(self, pending, future):
        if pending is not self.pending:
            return
        try:
            response = future.result()
        except Exception as exc:
            response = None
            message = repr(exc)
        if response is None or not response.ok:
            self.evaluation.fail(pending, response.message if response is not None else message)
            self.pending = None
            return
        pending.reset = {"task": response.task, "max_steps": int(response.max_steps),
                         "perturbation_applied": response.perturbation_applied}
        self._progress()
        self.maybe_finish()

    def on_state(self, msg: SimState):
        p = self.pending
        if p is None or msg.episode != p.number:
            return
        self._progress()
        if msg.done:
            p.final = {"success": bool(msg.success), "steps": int(msg.step)}
            self.maybe_finish()

    def on_report(self, msg: PolicyReport):
        p = self.pending
        if p is None or msg.episode != p.number:
            return
        if msg.error:
            self.evaluation.fail(p, f"policy: {msg.error}")
            self.pending = None
            return
        from sgvla.core.protocols import PromptBudget

        budget = None
        if msg.has_budget:
            budget = PromptBudget(int(msg.prompt_tokens), None if msg.prompt_budget < 0 else int(msg.prompt_budget),
                                  int(msg.triplets_total), int(msg.triplets_kept))
        p.report = {"prompt": msg.prompt, "budget": budget, "triplets_in_prompt": int(msg.triplets_in_prompt),
                    "graph_triplets": int(msg.graph_triplets), "visible_objects": list(msg.visible_objects),
                    "context_s": msg.context_ms_per_step * max(int(msg.steps_acted) - 1, 1) / 1000,
                    "decision": json.loads(msg.decision_json or "{}")}
        self._progress()
        self.maybe_finish()

    def _progress(self):
        if self.pending is not None and self.pending.reset is not None:
            self.deadline = time.monotonic() + self.get_parameter("step_timeout_s").value

    def maybe_finish(self):
        p = self.pending
        if p is None or p.reset is None or p.final is None or p.report is None:
            return
        record = self.evaluation.finish(p)
        self.pending = None
        result = EpisodeResult(policy=record["policy"], task_id=record["task_id"], perturbation=record["perturbation"],
                               mode=record["mode"], seed=record["seed"], success=record["success"],
                               steps=record["steps"], wall_time_s=float(record["wall_time_s"]),
                               failure_reason=record["failure_reason"])
        result.header.stamp = self.get_clock().now().to_msg()
        self.result_pub.publish(result)
        self.get_logger().info(f"episode {p.number}: success={record['success']} steps={record['steps']} "
                               f"wall={record['wall_time_s']} s")

    # -- the end ----------------------------------------------------------------------------------

    def finish(self, code: int):
        ev = self.evaluation
        if ev is not None:
            paths = ev.write_report()
            self.write_graph(ev.out / "ros_graph.json")
            self.get_logger().info(f"records: {ev.results.path} ({ev.finished} new, {ev.failed} failed); "
                                   + ", ".join(f"{k}: {v}" for k, v in paths.items()))
        self.exit_code = code
        for pub in (self.result_pub, self.spec_pub):  # delivered (e.g. to a recorder) before this node goes
            pub.wait_for_all_acked(Duration(seconds=2.0))
        raise NodeExit(code)

    def write_graph(self, path: Path):
        """Every topic with its publishers and subscribers (node, QoS) as this node sees the graph now."""
        def endpoints(infos):
            return sorted(({"node": i.node_name, "reliability": i.qos_profile.reliability.name.lower(),
                            "durability": i.qos_profile.durability.name.lower(), "depth": i.qos_profile.depth}
                           for i in infos), key=lambda e: e["node"])

        graph = {}
        for topic, types in self.get_topic_names_and_types():
            graph[topic] = {"types": types, "publishers": endpoints(self.get_publishers_info_by_topic(topic)),
                            "subscribers": endpoints(self.get_subscriptions_info_by_topic(topic))}
        services = {name: types for name, types in self.get_service_names_and_types()}
        path.write_text(json.dumps({"topics": graph, "services": services}, indent=1, sort_keys=True))


def main(args=None):
    raise SystemExit(run_node(Evaluator, args))


if __name__ == "__main__":
    main()
