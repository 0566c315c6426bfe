"""evaluator: runs an evaluation plan (the same config files as `sgvla eval`) over the node graph.

For each (policy, task, perturbation, mode, seed) of the plan, in `sgvla eval`'s order, skipping those already
recorded, it sends a `run_episode` goal to the policy node (which resets the environment and runs the episode
engine) and keeps the record it returns: a result in `<output_dir>/episodes.jsonl`, or an infrastructure
failure in `infra_failures.jsonl` (retried by the next run); each is also published on `eval/result`. At the
end it writes the report as `sgvla eval` does, a snapshot of the ROS graph (`ros_graph.json`), and exits: 0
when every episode has a result, 1 when some need a rerun, 2 for a bad plan, 3 when the node graph stopped
answering (startup, or an episode past its timeout).
"""

import json
from pathlib import Path

from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.duration import Duration

from sgvla.eval.results import RunFolderGone
from sgvla.nodegraph.evaluation import TopicEvaluation, load_eval_config
from sgvla_interfaces.action import RunEpisode
from sgvla_interfaces.msg import EpisodeRecord
from sgvla_ros.qos import QOS
from sgvla_ros.runtime import NodeExit, SgvlaNode, run_node, sleep
from sgvla_ros.state_io import key_values, record_msg, record_of


class Evaluator(SgvlaNode):
    live_parameters = frozenset({"startup_timeout_s", "episode_timeout_s"})  # read each time they are used: `ros2 param set` takes effect

    def __init__(self, **kwargs):
        super().__init__("evaluator", **kwargs)
        self.declare_parameter("config", "config/eval/default.yaml")
        self.declare_parameter("overrides", "")  # `sgvla eval`'s key=value items, space-separated, shell-quoted
        self.declare_parameter("output_dir", "")  # default: the plan's output_dir
        self.declare_parameter("wait_for_nodes", [""])  # node names that must be up before the first episode
        self.declare_parameter("wait_for_subscribers", [""])  # "topic:n": n subscriptions before the first episode
        self.declare_parameter("startup_timeout_s", 900.0)
        self.declare_parameter("episode_timeout_s", 1800.0)  # no result of an episode for this long: stop
        param = lambda name: self.get_parameter(name).value  # noqa: E731
        self.exit_code: int | None = None
        self.evaluation: TopicEvaluation | None = None
        try:
            import sgvla.plugins  # noqa: F401  (registers the plan's choices)

            cfg = load_eval_config(param("config"), param("overrides"), param("output_dir"))
            self.evaluation = TopicEvaluation(cfg)
        except Exception as exc:  # ConfigError, ValueError, RunDirError: a bad plan or folder
            self.get_logger().error(f"evaluator: {exc}")
            self.exit_code = 2
        self.wait_nodes = [n for n in param("wait_for_nodes") if n]
        self.wait_subs = [tuple(w.rsplit(":", 1)) for w in param("wait_for_subscribers") if w]
        self.result_pub = self.create_publisher(EpisodeRecord, "eval/result", QOS["reliable"])
        self.client = ActionClient(self, RunEpisode, "run_episode")
        self.started = self.get_clock().now()
        # The plan runs as one coroutine; in a group of its own it never blocks the callbacks it awaits.
        self.timer = self.create_timer(0.05, self.run, callback_group=ReentrantCallbackGroup())

    async def run(self):
        """The whole plan, once (the timer only starts it)."""
        self.timer.cancel()
        if self.exit_code is not None:
            raise NodeExit(self.exit_code)
        await self.startup()
        ev = self.evaluation
        self.get_logger().info(f"node graph ready; {len(ev.todo)} of {ev.total} episodes to run -> {ev.results.path}")
        timeout = self.get_parameter("episode_timeout_s").value
        while (goal := ev.next_goal()) is not None:
            done = ev.finished + ev.failed
            self.get_logger().info(f"[{done + 1}/{done + 1 + len(ev.todo)}] episode {goal.episode}: {tuple(goal.key)}")
            record = await self.run_goal(goal, timeout)
            if record is None:
                ev.fail(goal.key, f"no result within episode_timeout_s={timeout:g} s: the node graph stopped")
                self.finish(3)
            try:
                kept = ev.finish(record)
            except RunFolderGone as exc:
                self.get_logger().error(f"evaluator: stopped: {exc}")
                self.evaluation = None  # no report: its folder is gone
                self.finish(1)
            self.result_pub.publish(record_msg(record, self.header()))
            if kept:
                self.get_logger().info(f"episode {goal.episode}: success={kept['success']} steps={kept['steps']} "
                                       f"wall={kept['wall_time_s']} s")
            elif ev.cfg.on_infra_failure == "stop":
                self.get_logger().error("on_infra_failure=stop: ending the run after an infrastructure failure")
                break
        self.finish(1 if ev.failed or ev.todo else 0)

    async def startup(self):
        limit = self.get_parameter("startup_timeout_s").value
        while True:
            nodes = set(self.get_node_names())
            missing = [f"node {n}" for n in self.wait_nodes if n not in nodes]
            missing += [f"{t} ({self.count_subscribers(t)}/{n} subscribers)" for t, n in self.wait_subs
                        if self.count_subscribers(t) < int(n)]
            if not self.client.server_is_ready():
                missing.append("action server run_episode")
            if not missing:
                return
            self.get_logger().info(f"waiting for {', '.join(missing)}", throttle_duration_sec=10.0)
            if (self.get_clock().now() - self.started).nanoseconds / 1e9 > limit:
                self.get_logger().error(f"node graph not ready: {', '.join(missing)}")
                self.finish(3)
            await sleep(self, 0.1)

    async def run_goal(self, goal, timeout_s: float):
        """The record the policy node returns for `goal`, or None if none comes within `timeout_s`."""
        request = RunEpisode.Goal(
            episode=goal.episode, policy=goal.key.policy, policy_type=goal.policy_type,
            policy_options=key_values(goal.policy_options), task_id=goal.key.task_id,
            perturbation=goal.key.perturbation, mode=goal.key.mode, seed=goal.key.seed, view=goal.view,
            context_style=goal.context_style, graph_source=goal.graph_source, max_steps=goal.max_steps,
            suite=goal.suite, suite_options=key_values(goal.suite_options), render_images=goal.render_images)
        deadline = self.get_clock().now().nanoseconds + int(timeout_s * 1e9)
        sent = self.client.send_goal_async(request)
        while not sent.done():
            if self.get_clock().now().nanoseconds > deadline:
                return None
            await sleep(self, 0.05)
        handle = sent.result()
        if not handle.accepted:
            from sgvla.core.episode import EpisodeRecord as Record

            return Record(*goal.key, success=False, steps=0, max_steps=goal.max_steps, wall_time_s=0.0,
                          infra_failure="the policy node rejected the goal (busy with another episode)")
        result = handle.get_result_async()
        while not result.done():
            if self.get_clock().now().nanoseconds > deadline:
                handle.cancel_goal_async()
                return None
            await sleep(self, 0.05)
        return record_of(result.result().result.record)

    def header(self):
        from std_msgs.msg import Header

        return Header(stamp=self.get_clock().now().to_msg())

    # -- the end ----------------------------------------------------------------------------------

    def finish(self, code: int):
        ev = self.evaluation
        if ev is not None:
            paths = ev.write_report()
            self.write_graph(ev.out / "ros_graph.json")
            # one output per line, as sgvla eval's closing list (the summary above is on stdout)
            self.get_logger().info(f"records: {ev.results.path} ({ev.finished} new, {ev.failed} failed)\n"
                                   + "\n".join(f"{k}: {v}" for k, v in paths.items()))
        self.exit_code = code
        self.result_pub.wait_for_all_acked(Duration(seconds=2.0))  # delivered (e.g. to a recorder) first
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
