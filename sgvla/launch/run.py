"""`sgvla launch NAME [arg:=value ...]`: start a launch's nodes here, without ROS 2's launch tools.

Reads the same description as `launch/NAME.launch.py` (`sgvla.launch.plan`), runs every node as a process
(`python -m sgvla_ros.<module> --ros-args ...`, the parameter file plus the launch's values, remappings)
or, with `--single-process`, all of them in one rclpy process on one executor. Every participant gets the
loopback-only DDS environment and one ROS domain id: a free one, or `--domain-id N` once nothing else is on
domain N (`sgvla.launch.ros_domain`: the domain's ports and a discovery probe of about 3 s; two launches on one domain
would take each other's messages). Runs until the plan's main node exits (sim_eval: the evaluator; hardware: the
dataset_recorder when recording, else the arm or twin, which run until Ctrl-C), or another node exits first, then
stops the others (SIGTERM, which sgvla's nodes take as SIGINT, a clean stop; then SIGKILL) and returns the main
node's exit code (3 when another node exited first, 130 after Ctrl-C); children die with this process
(PR_SET_PDEATHSIG). Each node's stderr reaches the terminal prefixed by `[node] `; the node that exits first is
named, with its last error line, before the others are stopped, and again in the launch's last line.
"""

from __future__ import annotations

import argparse
import ctypes
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from sgvla.launch.plan import ARGUMENTS, Plan, launch_names, launch_plan
from sgvla.launch.node_output import NodeOutput
from sgvla.launch.ros_domain import domain_users, free_domain_id
from sgvla.core.ros_env import MAX_DOMAIN_ID, loopback_env

STOP_GRACE_S = 10.0
DRAIN_S = 0.5
OUTPUT_WAIT_S = 2.0  # for the last lines of a node that exited, before quoting its error


def parse_launch_args(items: list[str]) -> dict[str, str]:
    args = {}
    for item in items:
        name, sep, value = item.partition(":=")
        if not sep or not name:
            raise ValueError(f"launch argument {item!r} is not of the form name:=value")
        args[name] = value
    return args


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


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


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


def say(text: str) -> None:
    print(text, flush=True)  # in order with the nodes' lines, also when stdout is a pipe


def exit_text(code: int) -> str:
    return f"exit {code}" if code >= 0 else f"killed by {signal.Signals(-code).name}"


def exited(what: str, code: int, output: NodeOutput) -> str:
    """`what` (e.g. "camera exited first") with the exit code and the node's last error line."""
    output.wait(OUTPUT_WAIT_S)  # its last lines may still be in the pipe
    error = output.last_error()
    return f"{what} ({exit_text(code)})" + (f": {error}" if error else "")


def run_processes(plan: Plan, domain_id: int, log=say) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="sgvla_launch_") as tmp, Interrupts() as interrupts:
        overrides = write_overrides(plan, Path(tmp))
        env = node_env(plan, domain_id)
        procs: dict[str, subprocess.Popen] = {}
        outputs: dict[str, NodeOutput] = {}
        try:
            for node in plan.nodes:
                cmd = [sys.executable, "-m", node.module, *ros_args(node, plan.params_file, overrides)]
                procs[node.name] = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
                outputs[node.name] = NodeOutput(node.name, procs[node.name].stderr)
            log(f"sgvla launch {plan.name}: {len(procs)} nodes on ROS_DOMAIN_ID={domain_id} (loopback only): "
                + ", ".join(f"{n} [{p.pid}]" for n, p in procs.items()))
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
                    if name == plan.main:
                        time.sleep(DRAIN_S)
                        return Outcome(code, failed)
                    return Outcome(3, failed)
                time.sleep(0.1)
            log("sgvla launch: interrupted; stopping the nodes")
            return Outcome(130)
        finally:
            stop(procs)
            for output in outputs.values():
                output.wait(OUTPUT_WAIT_S)


def run_single_process(plan: Plan, domain_id: int, log=say) -> Outcome:
    """All nodes in one process (`sgvla_ros.multi_node`), one executor; its stderr is not prefixed (the nodes'
    log lines name them)."""
    with tempfile.TemporaryDirectory(prefix="sgvla_launch_") as tmp, Interrupts() as interrupts:
        overrides = write_overrides(plan, Path(tmp))
        spec = Path(tmp) / "nodes.yaml"
        spec.write_text(yaml.safe_dump({"main": plan.main, "nodes": [
            {"name": n.name, "module": n.module, "args": ros_args(n, plan.params_file, overrides)}
            for n in plan.nodes]}))
        proc = subprocess.Popen([sys.executable, "-m", "sgvla_ros.multi_node", str(spec)],
                                env=node_env(plan, domain_id), stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
        output = NodeOutput("multi_node", proc.stderr, prefix=False)
        log(f"sgvla launch {plan.name}: {len(plan.nodes)} nodes in one process [{proc.pid}] on "
            f"ROS_DOMAIN_ID={domain_id} (loopback only)")
        try:
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


def _options(parser) -> None:
    parser.add_argument("--domain-id", type=int, help="ROS_DOMAIN_ID (default: a free one); refused when something "
                                                      "is on that domain already (checking takes about 3 s)")
    parser.add_argument("--share-domain", action="store_true", help="with --domain-id: join the domain even when "
                                                                    "others are on it (your rviz, ros2 topic echo)")
    parser.add_argument("--record", metavar="FOLDER", help="the launch's record:=FOLDER: sim_eval records every "
                                                            "topic into a new rosbag2 folder (MCAP); hardware records "
                                                            "a LeRobot dataset (an existing one gains episodes)")
    parser.add_argument("--single-process", action="store_true", help="all nodes in one process on one executor")


def _rest(args) -> None:
    """Options and name:=value arguments in any order after the launch name (argparse stops at the first)."""
    inner = argparse.ArgumentParser(prog=f"sgvla launch {args.name}", add_help=False)
    _options(inner)
    inner.add_argument("launch_args", nargs="*")
    ns = inner.parse_intermixed_args(args.rest)
    args.launch_args = ns.launch_args
    for key in ("domain_id", "record"):
        if getattr(ns, key) is not None:
            setattr(args, key, getattr(ns, key))
    args.single_process = args.single_process or ns.single_process
    args.share_domain = args.share_domain or ns.share_domain


def check_domain(domain_id: int) -> str:
    """"" when nothing is on the chosen domain, else why the launch must not join it."""
    users = domain_users(domain_id)
    if users.probe_error:
        print(f"sgvla launch: checking ROS domain {domain_id}: {users.probe_error} (the port check stands)",
              file=sys.stderr)
    if users.empty:
        return ""
    return (f"ROS domain {domain_id} is in use on this machine: {users.describe()}. A second launch there would take "
            "the other's messages (and it this one's). Omit --domain-id to run on a free domain, stop what runs "
            "there, or pass --share-domain to join it anyway.")


def run(args) -> int:
    try:
        _rest(args)
        launch_args = parse_launch_args(args.launch_args)
        if args.record:
            launch_args["record"] = args.record
        plan = launch_plan(args.name, launch_args)
        if args.record and args.name == "sim_eval" and Path(args.record).exists():
            raise ValueError(f"--record {args.record}: exists; rosbag2 writes a new folder")
    except (ValueError, FileNotFoundError) as e:
        print(f"sgvla launch: {e}", file=sys.stderr)
        return 2
    if args.share_domain and args.domain_id is None:
        print("sgvla launch: --share-domain goes with --domain-id (the default domain is a free one)", file=sys.stderr)
        return 2
    if args.domain_id is None:
        domain_id = free_domain_id()
    else:
        domain_id = args.domain_id
        if not 0 <= domain_id <= MAX_DOMAIN_ID:
            print(f"sgvla launch: --domain-id must be in 0..{MAX_DOMAIN_ID}", file=sys.stderr)
            return 2
        refusal = "" if args.share_domain else check_domain(domain_id)
        if refusal:
            print(f"sgvla launch: {refusal}", file=sys.stderr, flush=True)
            return 2
    outcome = (run_single_process if args.single_process else run_processes)(plan, domain_id)
    if outcome.failed_first:
        print(f"sgvla launch {plan.name}: {outcome.failed_first}; the launch exits with {outcome.code}", flush=True)
    else:
        print(f"sgvla launch {plan.name}: {plan.main} exited with {outcome.code}", flush=True)
    return outcome.code


def add_parser(sub) -> None:
    names = launch_names()
    arg_help = "; ".join(f"{n}: " + ", ".join(f"{a.name} (default {a.default!r})" for a in ARGUMENTS[n]) for n in names)
    p = sub.add_parser("launch", help="start a ROS 2 node graph here (what `ros2 launch sgvla_ros NAME.launch.py` "
                                      "starts)",
                       description="Start the nodes of launch/NAME.launch.py with real rclpy on a loopback-only DDS "
                                   "domain; returns the exit code of the main node (sim_eval: the evaluator; hardware: "
                                   "the dataset_recorder when recording, else the arm or twin). Arguments: "
                                   + arg_help)
    _options(p)
    p.add_argument("name", choices=names)
    p.add_argument("rest", nargs=argparse.REMAINDER, metavar="name:=value",
                   help="launch arguments as for ros2 launch (options may come between them)")
    p.set_defaults(func=run)
