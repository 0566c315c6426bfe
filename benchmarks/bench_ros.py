"""The ROS 2 node graph's costs: image topic latency, and evaluation throughput over topics vs in process.

    python benchmarks/bench_ros.py [--messages 300] [--rate 30] [--episodes 2] [--max-steps 40] [--skip-eval]

1. Image latency: a publisher process sends rgb8 `sensor_msgs/Image`s (256x256 and 640x480) at `--rate`
   to a subscriber process, over the loopback-only Fast DDS profile (shared memory between processes of one
   machine), with the QoS the node graph uses for camera frames (`frames`: reliable, keep last 2) and
   sensor-data QoS (best effort). Latency = receive time - the header stamp set just before `publish`, so it
   includes building the message from a numpy array and turning it back into one (what nodes pay). p50/p95.
2. Evaluation throughput: one plan (scripted expert, task 0, `--episodes` seeds x standard and scene_graph,
   `--max-steps` steps, no images) in process (`sgvla eval`'s loop, one worker), over topics with one process
   per node (`sgvla launch sim_eval`, lock-step) and with all nodes in one process (`--single-process`).
   Episodes/hour from the per-episode wall times in the records (the first episode of each run, which builds
   the simulator, left out), and each run's total wall time including start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
SIZES = {"256x256": (256, 256), "640x480": (480, 640)}
QOS_NAMES = ("frames", "sensor")


# -- 1. image latency ---------------------------------------------------------------------------

def _topic(size: str, qos: str) -> str:
    return f"bench/image_{size}_{qos}"


def role_subscriber(out: str, expected: int) -> None:
    import rclpy
    from sensor_msgs.msg import Image

    from sgvla_ros.graph_io import stamp_key, stored_image_of
    from sgvla_ros.qos import QOS

    rclpy.init()
    node = rclpy.create_node("bench_image_sub")
    lat: dict[str, list[float]] = {}

    def on_image(key: str, msg: Image) -> None:
        now = time.time_ns()
        stored_image_of(msg)  # back to a numpy array, as a node would
        lat.setdefault(key, []).append((now - stamp_key(msg.header.stamp)) / 1e6)

    for size in SIZES:
        for qos in QOS_NAMES:
            key = f"{size}/{qos}"
            node.create_subscription(Image, _topic(size, qos), lambda m, k=key: on_image(k, m), QOS[qos])
    deadline = time.monotonic() + 600
    while sum(map(len, lat.values())) < expected and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.5)
        if Path(out + ".done").exists():
            break
    Path(out).write_text(json.dumps(lat))
    node.destroy_node()
    rclpy.shutdown()


def role_publisher(messages: int, rate: float, done: str) -> None:
    import rclpy
    from std_msgs.msg import Header

    from sgvla_ros.graph_io import image_msg, stamp
    from sgvla_ros.qos import QOS

    rclpy.init()
    node = rclpy.create_node("bench_image_pub")
    from sensor_msgs.msg import Image

    rng = np.random.default_rng(0)
    for size, (h, w) in SIZES.items():
        frames = rng.integers(0, 255, (8, h, w, 3), dtype=np.uint8)
        for qos in QOS_NAMES:
            pub = node.create_publisher(Image, _topic(size, qos), QOS[qos])
            deadline = time.monotonic() + 60
            while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.05)
            time.sleep(0.5)  # matched both ways
            for i in range(messages):
                t_next = time.monotonic() + 1.0 / rate
                header = Header(stamp=stamp(time.time_ns() / 1e9), frame_id="camera")
                pub.publish(image_msg(frames[i % len(frames)], header))
                rclpy.spin_once(node, timeout_sec=max(0.0, t_next - time.monotonic()))
            time.sleep(0.5)
    Path(done).touch()
    node.destroy_node()
    rclpy.shutdown()


def image_latency(messages: int, rate: float) -> list[tuple[str, str, float, float, int]]:
    from sgvla.core.ros_env import loopback_env
    from sgvla.launch.ros_domain import lease_free_domain

    lease = lease_free_domain()  # held until the measurement ends
    env = loopback_env(lease.domain_id)
    with lease, tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "lat.json")
        total = messages * len(SIZES) * len(QOS_NAMES)
        me = [sys.executable, __file__]
        sub = subprocess.Popen([*me, "--role", "sub", "--out", out, "--expected", str(total)], env=env)
        time.sleep(1.0)
        subprocess.run([*me, "--role", "pub", "--messages", str(messages), "--rate", str(rate), "--out", out + ".done"],
                       env=env, check=True)
        sub.wait(timeout=120)
        lat = json.loads(Path(out).read_text())
    rows = []
    for size in SIZES:
        for qos in QOS_NAMES:
            values = np.array(lat.get(f"{size}/{qos}", []))
            p50, p95 = (np.percentile(values, [50, 95]) if len(values) else (float("nan"),) * 2)
            rows.append((size, qos, float(p50), float(p95), len(values)))
    return rows


# -- 2. evaluation throughput -------------------------------------------------------------------

PLAN = {"name": "bench_ros", "suite": {"type": "libero_spatial", "render_profile": "fast", "image_size": 64},
        "policies": [{"type": "expert"}], "tasks": [0], "perturbations": "table7", "modes": ["standard", "scene_graph"],
        "workers": 1}


def _episodes_per_hour(path: Path) -> tuple[float, float, int]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    walls = [r["wall_time_s"] for r in records[1:]] or [r["wall_time_s"] for r in records]
    steps = [r["steps"] for r in records[1:]] or [r["steps"] for r in records]
    return 3600 / float(np.mean(walls)), 1000 * float(np.sum(walls)) / float(np.sum(steps)), len(records)


def evaluation(episodes: int, max_steps: int) -> list[tuple[str, float, float, float, int]]:
    env = {**os.environ, "MUJOCO_GL": "egl", "HF_HUB_OFFLINE": "1"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = {
            "in process (sgvla eval)": lambda cfg, out: [sys.executable, "-m", "sgvla.cli", "eval", "--quiet",
                                                         "--config", str(cfg), "--out", str(out)],
            "over topics, a process per node": lambda cfg, out: [sys.executable, "-m", "sgvla.cli", "launch",
                                                                 "sim_eval", f"eval_config={cfg}",
                                                                 f"output_dir={out}"],
            "over topics, one process": lambda cfg, out: [sys.executable, "-m", "sgvla.cli", "launch", "sim_eval",
                                                          f"eval_config={cfg}", f"output_dir={out}",
                                                          "--single-process"],
        }
        for i, (name, command) in enumerate(runs.items()):
            cfg, out = Path(tmp) / f"plan{i}.yaml", Path(tmp) / f"run{i}"
            cfg.write_text(yaml.safe_dump({**PLAN, "episodes": episodes, "max_steps": max_steps,
                                           "output_dir": str(out)}))
            t0 = time.perf_counter()
            proc = subprocess.run(command(cfg, out), env=env, capture_output=True, text=True)
            total = time.perf_counter() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"{name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            per_hour, ms_per_step, n = _episodes_per_hour(out / "episodes.jsonl")
            rows.append((name, per_hour, ms_per_step, total, n))
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=300, help="images per size and QoS")
    p.add_argument("--rate", type=float, default=30.0, help="images per second")
    p.add_argument("--episodes", type=int, default=2, help="seeds of the evaluation plan (x 2 modes)")
    p.add_argument("--max-steps", type=int, default=40)
    p.add_argument("--skip-eval", action="store_true")
    p.add_argument("--role", choices=("pub", "sub"), help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--expected", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role == "sub":
        role_subscriber(args.out, args.expected)
        return 0
    if args.role == "pub":
        role_publisher(args.messages, args.rate, args.out)
        return 0
    print(f"## Image topic latency ({args.messages} images at {args.rate:g} Hz, publisher and subscriber processes, "
          "loopback-only Fast DDS)\n")
    print("| image | QoS | p50 (ms) | p95 (ms) | received |\n|---|---|---|---|---|")
    for size, qos, p50, p95, n in image_latency(args.messages, args.rate):
        print(f"| {size} rgb8 | {qos} | {p50:.2f} | {p95:.2f} | {n}/{args.messages} |", flush=True)
    if not args.skip_eval:
        print(f"\n## Evaluation throughput (expert, task 0, {args.episodes} seeds x 2 modes, {args.max_steps} steps, "
              "lock-step over topics)\n")
        print("| run | episodes/hour | ms/step | total wall incl. start-up (s) | episodes |\n|---|---|---|---|---|")
        for name, per_hour, ms_step, total, n in evaluation(args.episodes, args.max_steps):
            print(f"| {name} | {per_hour:.0f} | {ms_step:.1f} | {total:.0f} | {n} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
