"""``python -m lerobot_robot_so101_twin sim-leader``: serve a simulated SO101 leader arm (sim_leader.py) until Ctrl-C.

Run as a module named ``...__main__`` on purpose: the simulated bus's process is started with multiprocessing's spawn
method, which re-imports the main module in the child unless it is a ``__main__`` module, and this package's import
loads LeRobot and torch, which the servos' process must not wait for.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading

from .sim_leader import DEFAULT_ID, serve_sim_leader


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lerobot_robot_so101_twin")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("sim-leader", help="a simulated SO101 leader arm on a pseudo-terminal, for "
                                          "--teleop.type=so101_leader (no hardware)")
    p.add_argument("--calibration-dir", default="so101_sim_leader",
                   help="where to write <id>.json (the leader's calibration file); default ./so101_sim_leader")
    p.add_argument("--id", default=DEFAULT_ID, help="the leader's id (--teleop.id)")
    args = parser.parse_args(argv)

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with serve_sim_leader(args.calibration_dir, args.id) as leader:
        teleop = shlex.join(leader.teleop_args())
        print(f"leader port: {leader.port}\ncalibration: {leader.calibration_dir}/{leader.arm_id}.json\n"
              f"lerobot-teleoperate --robot.type=so101_twin {teleop} --fps=30\nCtrl-C stops.", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
