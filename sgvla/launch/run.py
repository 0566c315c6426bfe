"""`sgvla launch NAME [arg:=value ...]`: start a launch's nodes here, without ROS 2's launch tools.

Reads the same description as `launch/NAME.launch.py` (`sgvla.launch.plan`), runs every node as a process
(`python -m sgvla_ros.<module> --ros-args ...`, the parameter file plus the launch's values, remappings)
or, with `--single-process`, all of them in one rclpy process on one executor. Every participant gets the
loopback-only DDS environment and one ROS domain id (a free one unless `--domain-id`). Runs until the
plan's main node exits (sim_eval: the evaluator; hardware: the dataset_recorder when recording, else the arm
or twin, which run until Ctrl-C), then stops the others (SIGINT, then SIGTERM, then SIGKILL) and returns the
main node's exit code (130 after Ctrl-C); children die with this process (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import argparse
import ctypes
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from sgvla.launch.plan import ARGUMENTS, Plan, launch_names, launch_plan
from sgvla.core.ros_env import MAX_DOMAIN_ID, loopback_env

STOP_GRACE_S = 10.0
DRAIN_S = 0.5


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_domain_id(rng: random.Random | None = None) -> int:
    """A domain id whose first participant's discovery port (Fast DDS: 7410 + 250 * id) is free on loopback."""
    ids = list(range(1, MAX_DOMAIN_ID + 1))
    (rng or random.Random()).shuffle(ids)
    for d in ids:
        base = 7400 + 250 * d
        if all(_port_free(base + off) for off in (10, 11, 12, 13)):
            return d
    raise RuntimeError("no free ROS domain id on this machine (all of 1..101 in use)")


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
    return env


def stop(procs: dict[str, subprocess.Popen], grace_s: float = STOP_GRACE_S) -> None:
    """SIGINT (rclpy's clean shutdown), then SIGTERM, then SIGKILL; waits for every child."""
    for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
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


def run_processes(plan: Plan, domain_id: int, log=print) -> int:
    with tempfile.TemporaryDirectory(prefix="sgvla_launch_") as tmp, Interrupts() as interrupts:
        overrides = write_overrides(plan, Path(tmp))
        env = node_env(plan, domain_id)
        procs: dict[str, subprocess.Popen] = {}
        try:
            for node in plan.nodes:
                cmd = [sys.executable, "-m", node.module, *ros_args(node, plan.params_file, overrides)]
                procs[node.name] = subprocess.Popen(cmd, env=env, preexec_fn=_die_with_parent)
            log(f"sgvla launch {plan.name}: {len(procs)} nodes on ROS_DOMAIN_ID={domain_id} (loopback only): "
                + ", ".join(f"{n} [{p.pid}]" for n, p in procs.items()))
            main = procs[plan.main]
            while not interrupts.seen:
                code = main.poll()
                if code is not None:
                    time.sleep(DRAIN_S)  # the others (a recorder) take what the main node sent last
                    return code
                dead = [(n, p.returncode) for n, p in procs.items() if n != plan.main and p.poll() is not None]
                if dead:
                    log(f"sgvla launch: node(s) exited early: {', '.join(f'{n} (exit {c})' for n, c in dead)}; "
                        "stopping the launch")
                    return 3
                time.sleep(0.1)
            log("sgvla launch: interrupted; stopping the nodes")
            return 130
        finally:
            stop(procs)


def run_single_process(plan: Plan, domain_id: int, log=print) -> int:
    """All nodes in one process (`sgvla_ros.multi_node`), one executor."""
    with tempfile.TemporaryDirectory(prefix="sgvla_launch_") as tmp, Interrupts() as interrupts:
        overrides = write_overrides(plan, Path(tmp))
        spec = Path(tmp) / "nodes.yaml"
        spec.write_text(yaml.safe_dump({"main": plan.main, "nodes": [
            {"name": n.name, "module": n.module, "args": ros_args(n, plan.params_file, overrides)}
            for n in plan.nodes]}))
        proc = subprocess.Popen([sys.executable, "-m", "sgvla_ros.multi_node", str(spec)],
                                env=node_env(plan, domain_id), preexec_fn=_die_with_parent)
        log(f"sgvla launch {plan.name}: {len(plan.nodes)} nodes in one process [{proc.pid}] on "
            f"ROS_DOMAIN_ID={domain_id} (loopback only)")
        try:
            while not interrupts.seen:
                code = proc.poll()
                if code is not None:
                    return code
                time.sleep(0.1)
            log("sgvla launch: interrupted; stopping the nodes")
            return 130
        finally:
            stop({"multi_node": proc})


def _options(parser) -> None:
    parser.add_argument("--domain-id", type=int, help="ROS_DOMAIN_ID (default: a free one)")
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
    domain_id = args.domain_id if args.domain_id is not None else free_domain_id()
    if not 0 <= domain_id <= MAX_DOMAIN_ID:
        print(f"sgvla launch: --domain-id must be in 0..{MAX_DOMAIN_ID}", file=sys.stderr)
        return 2
    code = (run_single_process if args.single_process else run_processes)(plan, domain_id)
    print(f"sgvla launch {plan.name}: {plan.main} exited with {code}", flush=True)
    return code


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
