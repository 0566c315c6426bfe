"""What the equivalence tests of `sgvla launch sim_eval` share (LIBERO's in tests/ros/test_sim_eval.py, the SO101
twin's in tests/ros/test_twin_sim_eval.py and tests/twin_ros/test_twin_learned_topics.py): domain ids, reading a
recorded bag, and the comparison of the same plan run over topics and in process (records, every action bit for
bit, each episode's last step). The `sim_eval` fixture (tests/conftest.py) hands out one `SimEvalTools`."""

import json
import os
import signal
import subprocess
import sys
from collections import defaultdict

import numpy as np
import yaml

from sgvla.launch.ros_domain import lease_free_domain, with_leases
from sgvla.paths import REPO_ROOT

TIMING = {"wall_time_s", "context_ms_per_step"}  # the only record fields allowed to differ


class SimEvalTools:
    TIMING = TIMING

    def __init__(self) -> None:
        self.leases = []

    def domain_ids(self, n: int) -> list[int]:
        """n domain ids leased for the rest of the session (sgvla.launch.ros_domain)."""
        self.leases.extend(lease_free_domain() for _ in range(n))
        return [x.domain_id for x in self.leases[-n:]]

    def run_together(self, commands: dict[str, list[str]], env: dict, timeout_s: float) -> dict[str, str]:
        """Start every command at once (each a process group of its own), wait for all, return their output by
        name; a command still running when the wait ends (a timeout, a failed test) is killed with its group.
        The commands' `sgvla launch --domain-id` know that this session holds the leases of `domain_ids`."""
        env = with_leases(env, [x.domain_id for x in self.leases])
        pipes = dict(env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        procs = {name: subprocess.Popen(cmd, **pipes) for name, cmd in commands.items()}
        logs = {}
        try:
            for name, proc in procs.items():
                logs[name], _ = proc.communicate(timeout=timeout_s)
        finally:
            for proc in procs.values():  # the launch's nodes go with their group
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        for name, proc in procs.items():
            assert proc.returncode == 0, f"{name}:\n{logs[name][-6000:]}"
        return logs

    def run_both(self, tmp_path, plan: dict, launch: tuple[str, ...] = ("so101_eval", "sim=true")
                 ) -> tuple[list[dict], dict]:
        """`plan` over topics (`sgvla launch <launch>`, recorded) and in process at once; asserts identical episodes
        and returns the topics' records and the bag's messages."""
        config = tmp_path / "plan.yaml"
        config.write_text(yaml.safe_dump({**plan, "output_dir": str(tmp_path / "inprocess")}))
        env = {**os.environ, "MUJOCO_GL": "egl"}
        self.run_together({
            "topics": [sys.executable, "-m", "sgvla.cli", "launch", *launch, f"eval_config={config}",
                       f"output_dir={tmp_path / 'topics'}", "render_images=false", "--record", str(tmp_path / "bag"),
                       "--domain-id", str(self.domain_ids(1)[0])],
            "inprocess": [sys.executable, str(REPO_ROOT / "tests/ros/inprocess_episodes.py"), str(config),
                          str(tmp_path / "inprocess.npz")],
        }, env, timeout_s=800)
        inproc = np.load(tmp_path / "inprocess.npz")
        expected = json.loads(str(inproc["records"]))
        got = [json.loads(line) for line in (tmp_path / "topics" / "episodes.jsonl").read_text().splitlines()]
        assert len(expected) == len(got) == plan["episodes"] * len(plan["policies"]) * len(plan["modes"]) * len(
            plan.get("tasks", [0]))
        bag = self.bag_messages(tmp_path / "bag")
        self.assert_same_episodes(expected, got, inproc, bag)
        return got, bag

    @staticmethod
    def bag_messages(path) -> dict[str, list]:
        from sgvla.nodegraph.bag import read_bag

        by_topic = defaultdict(list)
        for topic, _, msg in read_bag(path):
            by_topic[topic].append(msg)
        return by_topic

    @staticmethod
    def assert_same_episodes(expected: list[dict], got: list[dict], inproc, bag) -> None:
        """The records over topics (`got`, the evaluator's episodes.jsonl) equal those in process (`expected`, from
        tests/ros/inprocess_episodes.py, whose `inproc` arrays hold each episode's actions) but for timing; the
        actions on the `action` topic are the in-process ones bit for bit, and the last `sim/status` of each
        episode says its steps and (unless the policy gave up first) its end and success."""
        expected = json.loads(json.dumps(expected))  # as the JSONL file holds them
        assert [(r["task_id"], r["seed"], r["mode"], r["policy"]) for r in got] == [
            (r["task_id"], r["seed"], r["mode"], r["policy"]) for r in expected]
        actions = defaultdict(dict)
        for msg in bag["/action"]:
            actions[msg.episode][msg.step] = np.asarray(msg.data, dtype=np.float64)
        for i, (want, have) in enumerate(zip(expected, got)):
            episode = i + 1  # the evaluator numbers the plan's episodes from 1
            assert set(have) == set(want), set(have) ^ set(want)
            assert {k: v for k, v in have.items() if k not in TIMING} == {k: v for k, v in want.items()
                                                                            if k not in TIMING}
            sent = np.array([actions[episode][s] for s in range(have["steps"])], dtype=np.float64)
            assert sent.tobytes() == inproc[f"actions_{i}"].tobytes(), f"episode {episode}: actions differ"
            last = max((m for m in bag["/sim/status"] if m.episode == episode), key=lambda m: m.step)
            assert last.step == have["steps"]
            if not have["failure_reason"].startswith("policy gave up"):  # else it ended before the simulator's end
                assert last.done and last.success == have["success"]
