"""``sgvla launch NAME [name=value ...]``: start a launch's nodes here, without ROS 2's launch tools
(`sgvla.launch.run`), on a free ROS domain or a checked one; or print its nodes or topic table."""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
from pathlib import Path


from sgvla.launch.plan import ARGUMENTS, launch_names, launch_plan, topic_table

LAUNCH_SYNTAX = ("Launch arguments are name=value items (`ros2 launch` writes name:=value; sgvla does not), "
                 "anywhere after NAME; the value is the text after the first '=', as the shell hands it over "
                 "(nothing: empty), read by the argument's type. eval_overrides holds the key=value items of "
                 "`sgvla eval` in one argument: quote it for the shell, items with spaces quoted inside, e.g. "
                 "eval_overrides=\"tasks=[0] 'policies=[{type: expert}]'\".")
EXAMPLES = """Examples:
  sgvla launch sim_eval eval_overrides='tasks=[0] episodes=1' stepping=free_running
  sgvla launch hardware sim=true teleop=leader record=~/data/twin episodes=5
  sgvla launch hardware --table
  sgvla launch so101_eval config=~/rig.yaml eval_config=config/eval/so101_hardware.yaml   # the arm, an operator
  sgvla launch so101_eval sim=true eval_config=config/eval/so101_twin_ambiguous.yaml"""


def launch_arguments(items: list[str]) -> dict[str, str]:
    """`name=value` items as launch arguments: the text after the first '=', as `ros2 launch` hands a value over
    (each argument's type reads it: `sgvla.launch.registry`); the last of a repeated name wins."""
    out = {}
    for item in items:
        name, ros, value = item.partition(":=")
        if ros and "=" not in name:
            raise ValueError(f"launch argument {item!r}: write {name}={value} (sgvla takes name=value; := is ros2 "
                             "launch's)")
        name, equals, value = item.partition("=")
        if not equals or not name.isidentifier():
            raise ValueError(f"launch argument {item!r}: expected name=value")
        out[name] = value
    return out


def _options(parser) -> None:
    parser.add_argument("--domain-id", type=int, help="ROS_DOMAIN_ID (default: a free one); refused when something "
                                                      "is on that domain already or another sgvla launch holds it "
                                                      "(checking takes about 3 s).")
    parser.add_argument("--share-domain", action="store_true", help="With --domain-id: join the domain even when "
                                                                    "others are on it (your rviz, ros2 topic echo).")
    parser.add_argument("--record", metavar="FOLDER", help="The launch's record=FOLDER: sim_eval records every "
                                                            "topic into a new rosbag2 folder (MCAP); hardware records "
                                                            "a LeRobot dataset (an existing one gains episodes); so101_eval: a rosbag2 "
                                                            "folder.")
    parser.add_argument("--single-process", action="store_true", help="All nodes in one process on one executor.")
    parser.add_argument("--dry-run", action="store_true", help="Print the nodes with their parameters and "
                                                               "remappings, start nothing.")
    parser.add_argument("--table", action="store_true", help="Print the launch's node and topic tables (Markdown, "
                                                             "as in docs/ros.md), start nothing.")


def _rest(args) -> None:
    """Options and name=value arguments in any order after the launch name (argparse stops at the first)."""
    inner = argparse.ArgumentParser(prog=f"sgvla launch {args.name}", add_help=False)
    _options(inner)
    inner.add_argument("launch_args", nargs="*", metavar="name=value")
    ns = inner.parse_intermixed_args(args.rest)
    args.launch_args = ns.launch_args
    for key in ("domain_id", "record"):
        if getattr(ns, key) is not None:
            setattr(args, key, getattr(ns, key))
    for key in ("single_process", "share_domain", "dry_run", "table"):
        setattr(args, key, getattr(args, key) or getattr(ns, key))


def check_domain(domain_id: int) -> str:
    """"" when nothing is on the chosen domain, else why the launch must not join it."""
    from sgvla.launch.ros_domain import domain_users

    users = domain_users(domain_id)
    if users.probe_error:
        print(f"sgvla launch: checking ROS domain {domain_id}: {users.probe_error} (the port check stands)",
              file=sys.stderr)
    if users.empty:
        return ""
    return (f"ROS domain {domain_id} is in use on this machine: {users.describe()}. A second launch there would take "
            "the other's messages (and it this one's). Omit --domain-id to run on a free domain, stop what runs "
            "there, or pass --share-domain to join it anyway.")


def say(text: str) -> None:
    print(text, flush=True)  # in order with the nodes' lines, also when stdout is a pipe


def run(args: argparse.Namespace) -> int:
    from sgvla.core.ros_env import MAX_DOMAIN_ID

    if {"-h", "--help"} & set(args.rest):  # after NAME, where argparse hands everything on
        args.parser.print_help()
        return 0
    try:
        _rest(args)
        if args.table:
            print(topic_table(launch=args.name))
            return 0
        launch_args = launch_arguments(args.launch_args)
        if args.record:
            launch_args["record"] = args.record
        plan = launch_plan(args.name, launch_args)
        if args.record and args.name in ("sim_eval", "so101_eval") and Path(args.record).exists():
            raise ValueError(f"--record {args.record}: exists; rosbag2 writes a new folder")
    except (ValueError, FileNotFoundError) as e:
        print(f"sgvla launch: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        for n in plan.nodes:
            print(f"{n.name}: {n.executable} ({n.module}) {n.parameters} {list(n.remappings)}")
        return 0
    if args.share_domain and args.domain_id is None:
        print("sgvla launch: --share-domain goes with --domain-id (the default domain is a free one)", file=sys.stderr)
        return 2
    from sgvla.launch.ros_domain import DomainLease, lease_free_domain, leased_by_ancestor
    from sgvla.launch.run import run_processes, run_single_process

    lease = None  # held until the launch ends: no other sgvla launch or test session picks this domain meanwhile
    if args.domain_id is None:
        lease = lease_free_domain()
        domain_id = lease.domain_id
    else:
        domain_id = args.domain_id
        if not 0 <= domain_id <= MAX_DOMAIN_ID:
            print(f"sgvla launch: --domain-id must be in 0..{MAX_DOMAIN_ID}", file=sys.stderr)
            return 2
        refusal = ""
        if not (args.share_domain or leased_by_ancestor(domain_id)):
            lease = DomainLease(domain_id)
            if not lease.acquired:
                refusal = (f"ROS domain {domain_id} is taken by {lease.holder} (an sgvla launch or test session that "
                           "chose it). Omit --domain-id to run on a free domain, or pass --share-domain to join it "
                           "anyway.")
        refusal = refusal or ("" if args.share_domain else check_domain(domain_id))
        if refusal:
            print(f"sgvla launch: {refusal}", file=sys.stderr, flush=True)
            return 2
    try:
        # Checked again once the nodes run: something may have joined the domain between the check and the start.
        outcome = (run_single_process if args.single_process else run_processes)(plan, domain_id, log=say,
                                                                                  recheck=not args.share_domain)
    finally:
        if lease is not None:
            lease.release()
    if outcome.failed_first:
        for line in outcome.also_failed:
            print(f"sgvla launch {plan.name}: {line}", flush=True)
        print(f"sgvla launch {plan.name}: {outcome.failed_first}; the launch exits with {outcome.code}", flush=True)
    else:
        print(f"sgvla launch {plan.name}: {plan.main} exited with {outcome.code}", flush=True)
    return outcome.code


def add_parser(sub) -> None:
    names = launch_names()
    arguments = "\n".join(textwrap.fill(f"{n}: " + " ".join(f"{a.name}={shlex.quote(a.default)}" for a in ARGUMENTS[n]),
                                         100, initial_indent="  ", subsequent_indent="    ") for n in names)
    description = textwrap.fill(
        "Start the nodes of launch/NAME.launch.py with real rclpy on a loopback-only DDS domain; returns the exit "
        "code of the main node (sim_eval, so101_eval: the evaluator; hardware: the dataset_recorder when recording, else the arm "
        "or twin). " + LAUNCH_SYNTAX, 100)
    p = sub.add_parser("launch", help="Start a ROS 2 node graph here (what `ros2 launch sgvla_ros NAME.launch.py` "
                                      "starts).",
                       description=f"{description}\n\nArguments and their defaults:\n{arguments}",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    _options(p)
    p.add_argument("name", choices=names, help="The launch to start.")
    p.add_argument("rest", nargs=argparse.REMAINDER, metavar="name=value",
                   help="Launch arguments (options may come between them).")
    p.set_defaults(func=run, parser=p)
