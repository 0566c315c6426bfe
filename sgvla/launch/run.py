"""Start a launch's nodes here, without ROS 2's launch tools (what `sgvla launch NAME name=value ...` runs).

Reads the same description as `launch/NAME.launch.py` (`sgvla.launch.plan`), runs every node as a process
(`python -m sgvla_ros.<module> --ros-args ...`, the parameter file plus the launch's values, remappings)
or, with `run_single_process`, all of them in one rclpy process on one executor. Every participant gets the
loopback-only DDS environment and the ROS domain id it is given (`sgvla.launch.ros_domain` finds a free one and
checks a chosen one: two launches on one domain would take each other's messages). Runs until the plan's main
node exits (sim_eval: the evaluator; hardware: the dataset_recorder when recording, else the arm or twin, which
run until Ctrl-C), or another node exits first, then stops the others (SIGTERM, which sgvla's nodes take as SIGINT,
a clean stop; then SIGKILL) and returns the main node's exit code (3 when another node exited first, 130 after
Ctrl-C); children die with this process (PR_SET_PDEATHSIG). Each node's stderr reaches this process's stderr
prefixed by `[node] `; the node that exits first is named, with its last error line, in the `Outcome`.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from sgvla.core.processes import die_with_parent
from sgvla.core.ros_env import loopback_env
from sgvla.launch.node_output import NodeOutput
from sgvla.launch.plan import Plan

STOP_GRACE_S = 10.0
DRAIN_S = 0.5
OUTPUT_WAIT_S = 2.0  # for the last lines of a node that exited, before quoting its error
STARTUP_S = 30.0  # a node failing this soon after the launch started failed at start (a missing device, say)
CANNOT_START = "cannot start:"  # how a node's own error line begins when it could not be built (sgvla_ros.runtime)
ALSO_FAILED_S = 8.0  # then the others still starting get this long to fail too (the arm node imports torch first)
logger = logging.getLogger(__name__)


def write_overrides(plan: Plan, folder: Path) -> Path:
    """A ROS 2 parameter file with the launch's values (applied after the plan's parameter file)."""
    path = folder / f"{plan.name}_overrides.yaml"
    data = {n.name: {"ros__parameters": n.parameters} for n in plan.nodes if n.parameters}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def ros_args(node, params_file: Path, overrides: Path) -> list[str]:
    args = ["--ros-args", "-r", f"__node:={node.name}", "--params-file", str(params_file),
            "--params-file", str(overrides)]
    for src, dst in node.remappings:
        args += ["-r", f"{src}:={dst}"]
    return args


def _stop_with_parent() -> None:
    """A node's preexec_fn: SIGTERM (a clean stop: the arm's torque goes off) when this launcher ends."""
    die_with_parent(signal.SIGTERM)


def node_env(plan: Plan, domain_id: int) -> dict[str, str]:
    env = loopback_env(domain_id)
    for key, value in plan.env.items():
        env.setdefault(key, value)
    if sys.stderr.isatty():  # the nodes' stderr is a pipe to this process now: keep rcutils' colours
        env.setdefault("RCUTILS_COLORIZED_OUTPUT", "1")
    return env


def stop(procs: dict[str, subprocess.Popen], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM, then SIGKILL; waits for every child. SIGTERM and SIGINT are the same clean stop to a running node
    (sgvla_ros.runtime); a node still importing its modules just ends, where SIGINT would print a traceback."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        alive = [p for p in procs.values() if p.poll() is None]
        if not alive:
            return
        for p in alive:
            try:
                p.send_signal(sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(p.poll() is None for p in alive):
            time.sleep(0.05)


class Interrupts:
    """While entered, SIGINT and SIGTERM only set `seen`: a second Ctrl-C must not end the launcher while it
    stops the nodes (its children would get SIGTERM from PR_SET_PDEATHSIG in the middle of their cleanup)."""

    def __enter__(self) -> Interrupts:
        self.seen = False
        self.previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _on_signal(self, _signum, _frame) -> None:
        self.seen = True

    def __exit__(self, *exc) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)


@dataclass(frozen=True)
class Outcome:
    code: int  # the launch's exit code
    failed_first: str = ""  # "<node> exited first (exit N): <its last error line>"; "" when none failed
    # Nodes that failed too while the launch started (a rig with several devices missing): each one's quote.
    also_failed: tuple[str, ...] = ()


def exit_text(code: int) -> str:
    return f"exit {code}" if code >= 0 else f"killed by {signal.Signals(-code).name}"


def exited(what: str, code: int, output: NodeOutput) -> str:
    """`what` (e.g. "camera exited first") with the exit code and the node's last error line."""
    output.wait(OUTPUT_WAIT_S)  # its last lines may still be in the pipe
    error = output.last_error()
    if error:
        return f"{what} ({exit_text(code)}): {error}"
    last = output.last_line()
    return f"{what} ({exit_text(code)}) without an error message" + (f"; its last line: {last}" if last else "")


def _also_failing(procs: dict[str, subprocess.Popen], outputs: dict[str, NodeOutput], first: str) -> tuple[str, ...]:
    """The other nodes that fail while the launch starts, each quoted: a node that fails at start is given
    `ALSO_FAILED_S` for the others still starting to fail too, so one launch names every missing device (the camera
    and the arm port), not only the quickest to fail. Nodes still running then are left to be stopped."""
    deadline = time.monotonic() + ALSO_FAILED_S
    while time.monotonic() < deadline and any(p.poll() is None for n, p in procs.items() if n != first):
        time.sleep(0.1)
    return tuple(exited(f"{name} failed too", proc.returncode, outputs[name]) for name, proc in procs.items()
                 if name != first and proc.poll() not in (None, 0))


def domain_taken(domain_id: int, ours: set[int]) -> str:
    """Why the launch must stop because another process joined its domain between the check and the start (""
    when none did): checked the moment the nodes are started, so only what came in that window counts."""
    from sgvla.launch.ros_domain import foreign_users

    others = foreign_users(domain_id, ours)
    return (f"ROS domain {domain_id} was joined by another process while the launch started: {others}. The two "
            "would take each other's messages; stopping. Launch again (a free domain is chosen), or pass "
            "--share-domain to run beside it") if others else ""


def run_processes(plan: Plan, domain_id: int, log: Callable[[str], None] = logger.info,
                  recheck: bool = False) -> Outcome:
    """The plan's nodes, each a process, until the main one ends or one fails. `recheck`: the domain's ports are
    checked again the moment the nodes are started (before they hold ports of their own), for a process that joined
    it between the check and the start (`domain_taken`); what joins later (your rviz, `ros2 topic echo`) is welcome."""
    with tempfile.TemporaryDirectory(prefix="sgvla_launch_") as tmp, Interrupts() as interrupts:
        overrides = write_overrides(plan, Path(tmp))
        env = node_env(plan, domain_id)
        procs: dict[str, subprocess.Popen] = {}
        outputs: dict[str, NodeOutput] = {}
        try:
            for node in plan.nodes:
                cmd = [sys.executable, "-m", node.module, *ros_args(node, plan.params_file, overrides)]
                procs[node.name] = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, preexec_fn=_stop_with_parent)
                outputs[node.name] = NodeOutput(node.name, procs[node.name].stderr)
            started = time.monotonic()
            log(f"sgvla launch {plan.name}: {len(procs)} nodes on ROS_DOMAIN_ID={domain_id} (loopback only):\n"
                + textwrap.fill(", ".join(f"{n} [{p.pid}]" for n, p in procs.items()), 100, initial_indent="  ",
                                subsequent_indent="  "))
            taken = domain_taken(domain_id, {p.pid for p in procs.values()}) if recheck else ""
            if taken:
                log(f"sgvla launch: {taken}")
                return Outcome(2, taken)
            while not interrupts.seen:
                for name in sorted(procs, key=lambda n: n != plan.main):  # the main node first, then the plan's order
                    proc = procs[name]
                    code = proc.poll()
                    if code is None:
                        continue
                    if name == plan.main and code == 0:
                        time.sleep(DRAIN_S)  # the others (a recorder) take what the main node sent last
                        return Outcome(0)
                    failed = exited(f"{name} exited first", code, outputs[name])
                    log(f"sgvla launch: {failed}; stopping the launch")
                    # A node that could not start (a missing device) while the launch started: others may be
                    # failing the same way; a plan refused by the evaluator, say, needs no wait.
                    at_start = (time.monotonic() - started < STARTUP_S
                                and outputs[name].last_error().startswith(CANNOT_START))
                    also = _also_failing(procs, outputs, name) if at_start else ()
                    for line in also:
                        log(f"sgvla launch: {line}")
                    if name == plan.main:
                        time.sleep(DRAIN_S)
                        return Outcome(code, failed, also)
                    return Outcome(3, failed, also)
                time.sleep(0.1)
            log("sgvla launch: interrupted; stopping the nodes")
            return Outcome(130)
        finally:
            stop(procs)
            for output in outputs.values():
                output.wait(OUTPUT_WAIT_S)


def run_single_process(plan: Plan, domain_id: int, log: Callable[[str], None] = logger.info,
                       recheck: bool = False) -> Outcome:
    """All nodes in one process (`sgvla_ros.multi_node`), one executor; its stderr is not prefixed (the nodes'
    log lines name them)."""
    with tempfile.TemporaryDirectory(prefix="sgvla_launch_") as tmp, Interrupts() as interrupts:
        overrides = write_overrides(plan, Path(tmp))
        spec = Path(tmp) / "nodes.yaml"
        spec.write_text(yaml.safe_dump({"main": plan.main, "nodes": [
            {"name": n.name, "module": n.module, "args": ros_args(n, plan.params_file, overrides)}
            for n in plan.nodes]}))
        proc = subprocess.Popen([sys.executable, "-m", "sgvla_ros.multi_node", str(spec)],
                                env=node_env(plan, domain_id), stderr=subprocess.PIPE, preexec_fn=_stop_with_parent)
        output = NodeOutput("multi_node", proc.stderr, prefix=False)
        log(f"sgvla launch {plan.name}: {len(plan.nodes)} nodes in one process [{proc.pid}] on "
            f"ROS_DOMAIN_ID={domain_id} (loopback only)")
        try:
            taken = domain_taken(domain_id, {proc.pid}) if recheck else ""
            if taken:
                log(f"sgvla launch: {taken}")
                return Outcome(2, taken)
            while not interrupts.seen:
                code = proc.poll()
                if code is not None:
                    return Outcome(code, exited("the nodes' process ended", code, output) if code else "")
                time.sleep(0.1)
            log("sgvla launch: interrupted; stopping the nodes")
            return Outcome(130)
        finally:
            stop({"multi_node": proc})
            output.wait(OUTPUT_WAIT_S)
