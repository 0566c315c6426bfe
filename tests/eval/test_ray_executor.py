"""`executor: ray` on a real two-node Ray cluster (both nodes on this machine, loopback only): the same records as the
local executor, a node lost mid-run and a policy-server actor killed mid-run cost only their running episodes (as
infrastructure failures a rerun finishes, each episode recorded once), and `sgvla eval executor=ray` prints the local
run's table.

Ray's driver probes a public address to learn its own, so nothing here runs Ray outside a network namespace that has
loopback only: run by pytest, this module runs itself again under scripts/check_loopback.sh (`unshare
--net`, lo up, every packet captured; it fails when one leaves 127/8), and each test here reports the outcome of its
run in there. Without `unshare --net` (or tcpdump) the tests are skipped, never run outside."""

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest
import yaml

import sgvla.plugins  # noqa: F401
from sgvla.eval.config import EvalConfig
from sgvla.eval.run_dir import stored_settings
from sgvla.eval.runner import plan, run_plan

from .plans import records_by_key, run_with, small_config
from ..waiting import wait_until

pytestmark = [pytest.mark.sim, pytest.mark.slow, pytest.mark.integration]  # a Ray cluster (tests/tiers.py)

REPO = Path(__file__).resolve().parents[2]
LOOPBACK_CHECK = REPO / "scripts" / "check_loopback.sh"  # the project's copy of ../shared/dds/check_loopback.sh
INSIDE = os.environ.get("SGVLA_RAY_NETNS") == "1"  # this process runs in the loopback-only namespace
VENV_BIN = Path(sys.executable).parent
ENV = {**os.environ, "MUJOCO_GL": "egl", "HF_HUB_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0"}
# A lost node is declared dead after ~2 s rather than Ray's default ~30 s.
HEAD_ENV = {"RAY_health_check_initial_delay_ms": "0", "RAY_health_check_period_ms": "500",
            "RAY_health_check_timeout_ms": "1000", "RAY_health_check_failure_threshold": "3"}


# -- running this module inside the namespace -----------------------------------------------------------------------


def _namespace_unavailable() -> str:
    if not LOOPBACK_CHECK.is_file():
        return f"{LOOPBACK_CHECK} is missing"
    for tool in ("unshare", "tcpdump", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe = subprocess.run(["unshare", "--net", "ip", "link", "set", "lo", "up"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"no loopback-only network namespace here (`unshare --net` failed: {probe.stderr.strip()})"
    return ""


@pytest.fixture(scope="module")
def namespace_outcomes(request, tmp_path_factory) -> dict[str, tuple[str, str]]:
    """test name -> (passed/failed/skipped, message), from one run of the test's module (this one, or one that
    imports these fixtures) in the loopback namespace."""
    why = _namespace_unavailable()
    if why:
        pytest.skip(f"Ray runs only inside a loopback-only network namespace: {why}")
    folder = tmp_path_factory.mktemp("netns")
    junit = folder / "junit.xml"
    module = str(Path(request.module.__file__).relative_to(REPO))
    command = ["bash", str(LOOPBACK_CHECK), sys.executable, "-m", "pytest", module,
               "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", f"--basetemp={folder / 'tmp'}"]
    proc = subprocess.run(command, cwd=REPO, env={**ENV, "SGVLA_RAY_NETNS": "1"}, capture_output=True, text=True,
                          timeout=1500)
    output = proc.stdout + proc.stderr
    check = [line for line in output.splitlines() if line.startswith("loopback check:")]
    assert check, f"the loopback check did not run (exit {proc.returncode}):\n{output[-5000:]}"
    assert check[-1].endswith(" 0 not on 127/8") and proc.returncode != 3, check[-1]
    assert junit.is_file(), f"the tests did not run in the namespace (exit {proc.returncode}):\n{output[-5000:]}"
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            outcomes[case.get("name")] = ("failed", f"{failure.get('message')}\n{failure.text or ''}"[-8000:])
        elif skipped is not None:
            outcomes[case.get("name")] = ("skipped", skipped.get("message") or "")
        else:
            outcomes[case.get("name")] = ("passed", "")
    return outcomes


def in_loopback_namespace(test):
    """The test body runs in the namespace; out here the test reports what it did there."""
    import inspect

    names = list(inspect.signature(test).parameters)

    def run(request):
        if INSIDE:
            return test(**{name: request.getfixturevalue(name) for name in names})
        outcome, message = request.getfixturevalue("namespace_outcomes").get(test.__name__, ("missing", ""))
        if outcome == "skipped":
            pytest.skip(message)
        assert outcome == "passed", f"{test.__name__} in the loopback namespace: {outcome}\n{message}"

    run.__name__ = run.__qualname__ = test.__name__
    run.__doc__ = test.__doc__
    return run


# -- the cluster ----------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """One `ray start --block` (a process group of its own) and every process under it."""

    def __init__(self, args: list[str], log: Path, env: dict):
        self.log = log
        self.proc = subprocess.Popen([str(VENV_BIN / "ray"), "start", "--block", "--disable-usage-stats", *args],
                                     cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def processes(self) -> list[psutil.Process]:
        try:
            return [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def kill(self) -> None:
        """Every process of the node at once (SIGKILL), as when its machine is lost."""
        procs = self.processes()
        for p in procs:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        psutil.wait_procs(procs, timeout=10)
        self.proc.wait(10)


class Cluster:
    def __init__(self, folder: Path):
        # Ray's Unix sockets live under its temp dir, whose path must stay short (a socket's path has < 108 bytes).
        self.temp = tempfile.mkdtemp(prefix="sgvla_ray_", dir="/tmp")
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.head = self.second = None
        try:
            self._start(folder)
        except BaseException:
            self.close()
            raise

    def _start(self, folder: Path) -> None:
        common = ["--node-ip-address=127.0.0.1"]
        self.head = Node(["--head", f"--port={self.port}", "--num-cpus=2", "--include-dashboard=false",
                          f"--temp-dir={self.temp}", *common], folder / "head.log", {**ENV, **HEAD_ENV})
        wait_until(lambda: self.nodes() >= 1, 90, "the head node", logs=[folder / "head.log"], procs=[self.head.proc],
                   period_s=1)
        self.second = Node([f"--address={self.address}", "--num-cpus=1", *common], folder / "second.log", ENV)
        wait_until(lambda: self.nodes() >= 2, 90, "the second node", logs=[folder / "second.log"],
                   procs=[self.second.proc], period_s=1)

    def nodes(self) -> int:
        out = subprocess.run([str(VENV_BIN / "python"), "-c", f"""
import ray
ray.init(address={self.address!r}, log_to_driver=False, logging_level="ERROR")
print("NODES", sum(n["Alive"] for n in ray.nodes()))
"""], capture_output=True, text=True, env=ENV, timeout=60)
        lines = [x for x in out.stdout.splitlines() if x.startswith("NODES ")]
        return int(lines[-1].split()[1]) if lines else 0

    def close(self) -> None:
        for node in (self.second, self.head):
            if node is not None:
                node.kill()
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    assert INSIDE, "a Ray cluster starts only inside the loopback-only namespace"
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def tiny_act(tmp_path_factory) -> str:
    from sgvla.policies.tiny import build_tiny_act

    return str(build_tiny_act(tmp_path_factory.mktemp("tiny") / "act"))


# -- plans ----------------------------------------------------------------------------------------------------------


def _plan(out, policies, **settings) -> EvalConfig:
    return small_config(out, **{"policies": policies, "perturbations": "ambiguous_prompt", "episodes": 2,
                                "max_steps": 20, "workers": 2, **settings})


# -- the tests ------------------------------------------------------------------------------------------------------


@in_loopback_namespace
def test_sgvla_eval_on_ray_records_and_prints_what_the_local_run_does(cluster, tiny_act, tmp_path):
    """One plan, `sgvla eval` on each executor: the same records and the same table. A scripted policy and a learned
    one, both served (weights in the server actor, batched calls); another scripted policy takes prompt_grounded's
    path again."""
    cfg = _plan(tmp_path / "plan", [{"type": "prompt_grounded"}, {"type": "act", "path": tiny_act}], episodes=1,
                policy_server={"serve": "all"})
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(stored_settings(cfg)))
    base = [sys.executable, "-m", "sgvla.cli", "eval", "--config", str(plan_file), "--quiet"]
    local = _table_rows([*base, "workers=1", "--out", str(tmp_path / "local")])
    on_ray = _table_rows([*base, "executor=ray", f"executor.address={cluster.address}", "--out",
                          str(tmp_path / "ray")])
    assert on_ray == local
    runs = {executor: records_by_key(tmp_path / executor) for executor in ("local", "ray")}
    assert sorted(runs["ray"]) == sorted(runs["local"]) and len(runs["local"]) == len(plan(cfg))
    # Action digests included: the policies' actions were the same at every step. (The tiny ACT's used to differ:
    # torch computed on 2 threads here and on 1 in Ray's server actor, where Ray sets OMP_NUM_THREADS=1; a policy's
    # `threads` now fixes it on every executor, sgvla.policies.checkpoint.use_threads.)
    for key, record in runs["local"].items():
        assert runs["ray"][key] == record, key


@in_loopback_namespace
def test_a_killed_policy_server_actor_costs_its_running_episodes_and_the_run_goes_on(cluster, tmp_path):
    import ray
    from ray.util import list_named_actors

    from sgvla.policies.serving.ray import NAMESPACE, SERVER_PREFIX

    cfg = _plan(tmp_path, [{"type": "prompt_grounded"}], episodes=3, max_steps=30,
                policy_server={"serve": "all"}, executor={"type": "ray", "address": cluster.address})
    ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.ERROR)
    killed = []

    def kill_server() -> bool:
        names = [a["name"] for a in list_named_actors(all_namespaces=True)
                 if a["namespace"] == NAMESPACE and a["name"].startswith(SERVER_PREFIX)]
        if names:
            ray.kill(ray.get_actor(names[0], namespace=NAMESPACE), no_restart=True)
            killed.append(names[0])
        return bool(names)

    try:
        first = run_with(cfg, kill_server)  # RayPool uses this process's connection and leaves it open
    finally:
        ray.shutdown()
    assert killed, "the policy server actor was never seen"
    kinds = [r["kind"] for r in first.outstanding.values()]
    assert kinds and set(kinds) == {"policy_server_lost"}, first.outstanding
    assert first.recorded + len(first.outstanding) == len(plan(cfg))  # a new server ran the rest
    second = run_plan(cfg, progress=False)
    assert second.complete and second.recorded == len(kinds)
    assert sorted(records_by_key(tmp_path)) == sorted(plan(cfg))  # each once


def _table_rows(command: list[str]) -> list[str]:
    """The rows of table.md in the run's folder (the command's last argument, its --out) and the summary printed
    (from its first policy's line to the report's paths; what a library printed while the run went is not in it)."""
    proc = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line for line in (Path(command[-1]) / "table.md").read_text().splitlines() if line.startswith("| 0")]
    printed = proc.stdout.split("Per task:")[0].splitlines()
    first = [i for i, line in enumerate(printed) if line.endswith("all tasks pooled")]
    assert rows and first, proc.stdout[-3000:]
    return rows + printed[first[0]:]


@in_loopback_namespace
def test_a_lost_node_loses_and_duplicates_nothing_and_a_rerun_finishes(cluster, tmp_path):
    """Three workers on three CPUs: one is on the second node, which is killed while it runs an episode (its
    replacement cannot be placed: the other two finish the run). Runs last: the cluster keeps the head only."""
    cfg = _plan(tmp_path, [{"type": "prompt_grounded"}], episodes=3, max_steps=40, workers=3,
                executor={"type": "ray", "address": cluster.address, "cpus_per_worker": 1.0})
    killed = []

    def kill_second_node() -> bool:
        titles = []
        for p in cluster.second.processes():
            try:
                titles.append(" ".join(p.cmdline()))
            except psutil.Error:
                pass
        if any(t.startswith("ray::_WorkerActor.run") for t in titles):
            cluster.second.kill()
            killed.append(time.monotonic())
            return True
        return False

    first = run_with(cfg, kill_second_node)
    assert killed, "the second node never ran an episode"
    kinds = [r["kind"] for r in first.outstanding.values()]
    assert "worker_lost" in kinds, first.outstanding
    assert first.recorded + len(first.outstanding) == len(plan(cfg)) and not first.not_run, first
    assert len(records_by_key(tmp_path)) == first.recorded  # once each
    second = run_plan(cfg, progress=False)
    assert second.complete and second.recorded == len(kinds), second
    assert sorted(records_by_key(tmp_path)) == sorted(plan(cfg))  # each exactly once
