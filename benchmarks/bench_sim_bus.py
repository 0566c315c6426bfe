"""Simulated servo replies under load: the bus's server in a thread of the MuJoCo process, or in a process of its own;
and the reader on the Feetech SDK's port, or on sgvla's load-tolerant one.

    python benchmarks/bench_sim_bus.py [--packets 10000] [--busy 2] [--rounds 2] [--python-threads 0]

The hypothesis behind sgvla/so101/hardware/sim_bus.py's design: a reply thread that shares a process, and so its GIL,
with MuJoCo physics, rendering and LeRobot's busy-polling reads misses LeRobot's packet timeout (about 50 ms) now
and then on a loaded machine, while a real servo (its own hardware) never does. This benchmark runs what
`sgvla record --config twin` runs in one process: the SO101 twin's physics in real time (TwinClock, exchanging
joints and goals with the twin's bus at every tick), its two cameras rendering continuously on a thread of their
own (agentview with depth and wrist, 320x240 as config/hardware/twin.yaml), and LeRobot's FeetechMotorsBus used as
FollowerArm uses it (sync_read Present_Position, then sync_write Goal_Position, back to back; no retries, so that
every lost reply shows), while ``--busy`` processes spin on the CPUs. The twin's bus is served by the same server
loop (sgvla.so101.hardware.servo_server.serve) in two ways:

  thread   a thread of this process (at nice -10 where allowed), as the bus was served before
  process  a process of its own (TwinFeetechBus as shipped), the reader on the SDK's port as LeRobot ships it
  tolerant a process of its own, the reader on sgvla.so101.hardware.port's port (what the arms use): a reply that
           came while the reader was off the CPU is read, a late one does not answer the next instruction, the
           wait sleeps instead of spinning

``--python-threads N`` adds N threads of pure-Python work to this process (what a recording loop, frame conversions
and LeRobot's bookkeeping add there). Rounds alternate the two modes, so both see the same machine. Per mode:
instruction packets the server received, dropped replies (sync_reads that timed out or came back garbled), the
sync_read round trip (p50/p99/max, failed ones included: that is what the caller waited), and the MuJoCo work done
meanwhile (frames rendered, physics ticks).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import os
import subprocess
import sys
import threading
import time

# Everything heavy is imported in functions: a bus's server process is started with the spawn method, which
# re-imports this script as its main module.
MODES = ("thread", "process", "tolerant")
BUSY = "while True: pass"


def thread_hosted(base: type) -> type:
    """``base`` (a SimFeetechBus class) with its server loop in a thread of this process instead of a process."""
    from sgvla.so101.hardware.servo_server import serve

    class ThreadHosted(base):
        def _launch(self, spec):
            mine, theirs = multiprocessing.Pipe()

            def run() -> None:
                with contextlib.suppress(PermissionError):  # what the reply thread did before
                    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), -10)
                serve(theirs, spec)

            self._thread = threading.Thread(target=run, name="sim-feetech", daemon=True)
            self._thread.start()
            return mine

        def _host_alive(self) -> bool:
            return self._thread.is_alive()

        def _reap(self) -> None:
            self._thread.join()

        @property
        def server_pid(self) -> int:
            return os.getpid()

    ThreadHosted.__name__ = f"ThreadHosted{base.__name__}"
    return ThreadHosted


class Renderer(threading.Thread):
    """Renders the twin's cameras back to back, as the recording's camera threads do (one OpenGL thread)."""

    def __init__(self, twin, width: int, height: int):
        super().__init__(name="twin render", daemon=True)
        self.twin, self.width, self.height = twin, width, height
        self.frames = 0
        self.stop = threading.Event()

    def run(self) -> None:
        from sgvla.so101.twin.twin import TwinView

        view = TwinView(self.twin)
        try:
            while not self.stop.is_set():
                view.render("agentview", self.width, self.height)
                view.render_depth("agentview", self.width, self.height)
                view.render("wrist", self.width, self.height)
                self.frames += 1
        finally:
            view.close()


def python_work(stop: threading.Event) -> None:
    """Pure-Python work (a recording loop's bookkeeping, frame conversions): holds the GIL until made to let go."""
    while not stop.is_set():
        sum(range(1000))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def connect(port: str, calibration: dict, tolerant: bool):
    """LeRobot's FeetechMotorsBus on ``port`` with torque on (setup retried: only the measured loop counts), on the
    SDK's port or the load-tolerant one."""
    from lerobot.motors import Motor, MotorNormMode
    from lerobot.motors.feetech import FeetechMotorsBus

    from sgvla.so101.hardware.joints import GRIPPER, JOINTS, MOTOR_IDS
    from sgvla.so101.hardware.port import make_load_tolerant

    modes = {j: MotorNormMode.RANGE_0_100 if j == GRIPPER else MotorNormMode.DEGREES for j in JOINTS}
    bus = FeetechMotorsBus(port, {j: Motor(MOTOR_IDS[j], "sts3215", modes[j]) for j in JOINTS}, calibration)
    if tolerant:
        make_load_tolerant(bus)
    bus.connect(handshake=False)
    bus.enable_torque(num_retry=20)
    return bus


def measure(bus_class: type, twin, cycles: int, tolerant: bool) -> dict:
    """``cycles`` times sync_read + sync_write against a twin bus of ``bus_class``; goals swing the arm slowly."""
    from sgvla.so101.hardware.joints import GRIPPER, JOINTS
    from sgvla.so101.twin.bus import TwinClock

    with bus_class(twin) as sim:
        clock = TwinClock(twin, bus=sim).start()
        client = connect(sim.port, sim.calibration, tolerant)
        try:
            start = client.sync_read("Present_Position", num_retry=20)
            packets, ticks, t0 = sim.packets, clock.ticks, time.monotonic()
            latencies, dropped, errors = [], 0, {}
            for _ in range(cycles):
                sent = time.perf_counter()
                try:
                    client.sync_read("Present_Position", num_retry=0)
                except Exception as e:  # ConnectionError: no or a garbled status packet
                    dropped += 1
                    kind = str(e).split("[TxRxResult]")[-1].strip()[:60]
                    errors[kind] = errors.get(kind, 0) + 1
                latencies.append((time.perf_counter() - sent) * 1e3)
                swing = 5.0 * math.sin(math.pi * (time.monotonic() - t0))  # +-5 degrees at 0.5 Hz
                client.sync_write("Goal_Position", {j: start[j] + (0.0 if j == GRIPPER else swing) for j in JOINTS})
            seconds = time.monotonic() - t0
            packets, ticks = sim.packets - packets, clock.ticks - ticks
        finally:
            clock.close()
            with contextlib.suppress(Exception):
                client.disconnect(disable_torque=False)
    return {"packets": packets, "dropped": dropped, "latencies": latencies, "errors": errors, "seconds": seconds,
            "ticks": ticks}


def row(name: str, values: list, ratio: bool, fmt: str) -> str:
    """The modes' values, then each of the first two over the last (tolerant)."""
    cells = [format(v, fmt) for v in values]
    for a in values[:-1]:
        b = values[-1]
        cells.append("" if not ratio else "inf" if b == 0 and a > 0 else "1.0" if b == 0 else f"{a / b:.1f}")
    return f"{name:<22}" + "".join(f"{c:>16}" for c in cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--packets", type=int, default=10_000, help="instruction packets per mode (>= 2)")
    parser.add_argument("--busy", type=int, default=2, help="busy processes loading the CPUs during the run")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the modes (each gets packets/rounds)")
    parser.add_argument("--width", type=int, default=320, help="camera image width")
    parser.add_argument("--height", type=int, default=240, help="camera image height")
    parser.add_argument("--task-id", type=int, default=0, help="twin task (config/twin/so101_tabletop.yaml)")
    parser.add_argument("--python-threads", type=int, default=0,
                        help="threads of pure-Python work in this process besides physics and rendering")
    args = parser.parse_args()
    if args.packets < 2 or args.rounds < 1 or args.busy < 0 or args.python_threads < 0:
        parser.error("--packets must be at least 2, --rounds at least 1, --busy and --python-threads at least 0")
    os.environ.setdefault("MUJOCO_GL", "egl")
    from sgvla.so101.twin.bus import TwinFeetechBus
    from sgvla.so101.twin.config import load_twin_config
    from sgvla.so101.twin.twin import So101Twin

    classes = {"thread": thread_hosted(TwinFeetechBus), "process": TwinFeetechBus, "tolerant": TwinFeetechBus}
    cycles = max(1, args.packets // 2 // args.rounds)  # a cycle is two packets: a sync_read and a sync_write
    twin = So101Twin(load_twin_config(), task_id=args.task_id)
    renderer = Renderer(twin, args.width, args.height)
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.busy)]
    working = threading.Event()
    workers = [threading.Thread(target=python_work, args=(working,), daemon=True) for _ in range(args.python_threads)]
    results = {m: {"packets": 0, "dropped": 0, "latencies": [], "errors": {}, "seconds": 0.0, "ticks": 0, "frames": 0}
               for m in MODES}
    try:
        renderer.start()
        for worker in workers:
            worker.start()
        while not renderer.frames and renderer.is_alive():  # OpenGL set up, the first frames drawn
            time.sleep(0.05)
        if not renderer.frames:
            raise SystemExit("bench_sim_bus: the render thread failed (its traceback above): no load to measure under")
        for r in range(args.rounds):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                frames = renderer.frames
                got = measure(classes[mode], twin, cycles, tolerant=mode == "tolerant")
                total = results[mode]
                total["frames"] += renderer.frames - frames
                for key in ("packets", "dropped", "seconds", "ticks"):
                    total[key] += got[key]
                total["latencies"] += got["latencies"]
                for kind, n in got["errors"].items():
                    total["errors"][kind] = total["errors"].get(kind, 0) + n
                print(f"round {r + 1} {mode:<8} {got['packets']:>6} packets, {got['dropped']:>4} dropped, "
                      f"{got['seconds']:.1f} s", file=sys.stderr, flush=True)
    finally:
        renderer.stop.set()
        working.set()
        renderer.join(timeout=10)
        for worker in workers:
            worker.join()
        for proc in busy:
            proc.kill()
            proc.wait()
        twin.close()

    res = [results[m] for m in MODES]
    extra = f" + {args.python_threads} pure-Python threads" if args.python_threads else ""
    print(f"\nSimulated Feetech bus (the SO101 twin's) under load, {os.cpu_count()} CPUs, {args.busy} busy processes;\n"
          f"this process: twin physics in real time + 2 cameras rendering {args.width}x{args.height} continuously"
          f"{extra}\n+ LeRobot's FeetechMotorsBus (sync_read Present_Position + sync_write Goal_Position back to back, "
          f"no retries), {args.rounds} alternating rounds\n")
    print(f"{'mode':<22}" + "".join(f"{h:>16}" for h in (*MODES, "thread/tolerant", "process/tolerant")))
    print(row("packets", [r["packets"] for r in res], False, "d"))
    print(row("dropped replies", [r["dropped"] for r in res], True, "d"))
    print(row("dropped %", [100 * r["dropped"] / max(1, len(r["latencies"])) for r in res], False, ".3f"))
    for name, q in (("sync_read p50 ms", 50), ("sync_read p99 ms", 99), ("sync_read max ms", 100)):
        print(row(name, [percentile(r["latencies"], q) for r in res], True, ".2f"))
    print(row("frames rendered /s", [r["frames"] / r["seconds"] for r in res], True, ".1f"))
    print(row("physics ticks /s", [r["ticks"] / r["seconds"] for r in res], True, ".1f"))
    print(row("cycles /s", [len(r["latencies"]) / r["seconds"] for r in res], True, ".1f"))
    for mode in MODES:
        for kind, n in sorted(results[mode]["errors"].items()):
            print(f"  {mode}: {n} x {kind}")


if __name__ == "__main__":
    main()
