"""``sgvla sim-bus``: a simulated SO101 follower and leader on pseudo-terminals, for trying things without an arm."""

import argparse
import os
import shlex
import signal
import threading
from pathlib import Path


def default_calibration_dir() -> Path:
    """The simulated arms' calibration files go to the user's cache (``$XDG_CACHE_HOME/sgvla/sim_calibration``,
    else ``~/.cache/...``), not into whatever folder the command was started from: they are the same every time
    (``sim_calibration``), so one folder serves every run, and the command prints it."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "sgvla" / "sim_calibration"


def add_parser(sub) -> None:
    p = sub.add_parser("sim-bus", help="Serve a simulated SO101 follower and leader bus (no hardware).",
                       description="Two simulated Feetech buses on pseudo-terminals, with calibration files, "
                                   "so that `sgvla record` and the ROS nodes run without an arm. The leader "
                                   "moves by itself (slow sine waves), as if a hand moved it.")
    p.add_argument("--calibration-dir", type=Path, default=None,
                   help="Where to write so101_follower.json and so101_leader.json (default: "
                        "$XDG_CACHE_HOME/sgvla/sim_calibration, else ~/.cache/sgvla/sim_calibration; printed).")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sgvla.so101.hardware.calibration import write_arm_calibration
    from sgvla.so101.hardware.sim_bus import LEADER_MOTION, SimFeetechBus, sim_calibration

    folder = args.calibration_dir or default_calibration_dir()
    # Ctrl-C or SIGTERM (a service manager, a script) stops it, also one arriving while the buses start: the buses
    # are then closed and their processes reaped before it exits, never left serving a port nobody owns.
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with SimFeetechBus() as follower, SimFeetechBus(motion=LEADER_MOTION) as leader:
        for arm_id in ("so101_follower", "so101_leader"):
            write_arm_calibration(folder / f"{arm_id}.json", sim_calibration())
        ports = {"follower": follower.port, "leader": leader.port}
        items = shlex.join(f"{arm}.{key}={value}" for arm, port in ports.items()
                           for key, value in (("port", port), ("calibration_dir", folder)))
        print(f"follower port: {follower.port}\nleader port:   {leader.port}\ncalibration:   {folder}/\n"
              f"sgvla record --config synthetic {items} --root DIR --task TASK\n"
              "Ctrl-C stops.", flush=True)
        stop.wait()
        # How each bus kept up, for telling a client's lost replies from a server that was off the CPU.
        for arm, bus in (("follower", follower), ("leader", leader)):
            health = ", ".join(f"{k} {v}" for k, v in bus.health().items())
            print(f"{arm} bus: {bus.packets} packets; {health}", flush=True)
    return 0
