"""Camera and joint state rates of the `so101_twin` node over topics: full vs decimated render meshes, one run.

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_twin_node.py [--seconds 10] [--width 320 --height 240]
        [--baseline-tree DIR]

The node runs as its own process with the twin rig (config/hardware/twin.yaml: agentview with depth and wrist,
both at 30 fps, here at --width x --height) on a loopback-only ROS domain; an observer process subscribes to
`joint_states`, `agentview/image_raw` and `wrist/image_raw` with the rig's QoS and counts what arrives over
--seconds after the first image of each camera (start-up excluded). Rows: `render_meshes:=full` (the package's
meshes, as before this change) and the default decimated meshes; `--baseline-tree DIR` adds a row for the node of
another checkout (e.g. `git worktree add /tmp/base <commit>`: the code before a change, its own camera threads).
Joint state gaps: the longest interval between two joint_states messages (the rig's period is 33 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TOPICS = ("joint_states", "agentview/image_raw", "wrist/image_raw")

OBSERVE = """
import json, sys, time, rclpy
from sensor_msgs.msg import Image, JointState
from sgvla_ros.qos import QOS
seconds = float(sys.argv[1])
rclpy.init()
node = rclpy.create_node("bench_observer")
seen = {}
for topic, kind in (("joint_states", JointState), ("agentview/image_raw", Image), ("wrist/image_raw", Image)):
    node.create_subscription(kind, topic, lambda m, t=topic: seen.setdefault(t, []).append(time.monotonic()),
                             QOS["sensor"])
deadline = time.monotonic() + 300
while len(seen) < 3 and time.monotonic() < deadline:
    rclpy.spin_once(node, timeout_sec=0.1)
start = time.monotonic()
while time.monotonic() < start + seconds:
    rclpy.spin_once(node, timeout_sec=0.01)
end = time.monotonic()
out = {}
for topic, stamps in seen.items():
    inside = [s for s in stamps if start <= s <= end]
    gaps = [b - a for a, b in zip(inside, inside[1:])]
    out[topic] = {"hz": len(inside) / (end - start), "max_gap_ms": 1000 * max(gaps, default=0.0)}
print(json.dumps(out))
"""


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"


def measure(tree: Path, rig: Path, meshes: str | None, seconds: float, domain: int) -> dict:
    from sgvla.core.ros_env import loopback_env

    env = {**loopback_env(domain), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "ros2_ws/src/sgvla_ros"), env.get("PYTHONPATH", "")])
    args = ["--ros-args", "-p", f"config:={rig}"] + (["-p", f"render_meshes:={meshes}"] if meshes else [])
    node = subprocess.Popen([sys.executable, "-m", "sgvla_ros.so101_twin", *args], env=env, cwd=tree,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        watched = subprocess.run([sys.executable, "-c", OBSERVE, str(seconds)], env=env, capture_output=True,
                                 text=True, timeout=seconds + 400)
    finally:
        node.terminate()
        log = node.communicate(timeout=60)[0]
    if watched.returncode != 0:
        raise SystemExit(f"observer failed: {watched.stderr[-2000:]}\nnode: {log[-2000:]}")
    return json.loads(watched.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--baseline-tree", type=Path, help="another checkout whose node gives a 'baseline' row")
    parser.add_argument("--domain-id", type=int, default=None, help="ROS domain (default: a free one, leased)")
    args = parser.parse_args()
    if args.domain_id is None:
        from sgvla.launch.ros_domain import lease_free_domain

        lease = lease_free_domain()  # held until the benchmark exits
        args.domain_id = lease.domain_id
    rig = yaml.safe_load((REPO / "config/hardware/twin.yaml").read_text())
    for camera in rig["cameras"]:
        camera.update(width=args.width, height=args.height)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "twin_rig.yaml"
        path.write_text(yaml.safe_dump(rig))
        runs = {}
        if args.baseline_tree:
            runs[f"baseline ({args.baseline_tree})"] = (args.baseline_tree.resolve(), None)
        runs["full meshes"] = (REPO, "full")
        runs["decimated meshes"] = (REPO, "decimated")
        loads, rows = {}, {}
        for name, (tree, meshes) in runs.items():
            rows[name] = measure(tree, path, meshes, args.seconds, args.domain_id)
            loads[name] = load_average()
    print(f"so101_twin node, cameras {args.width}x{args.height} (agentview color+depth, wrist color), rig 30 fps, "
          f"{args.seconds:g} s per row")
    print(f"{'node':<28} {'agentview Hz':>12} {'wrist Hz':>9} {'joint_states Hz':>15} {'max js gap ms':>13}  "
          f"{'load avg (1/5/15 min)':>21}")
    for name, row in rows.items():
        print(f"{name:<28} {row['agentview/image_raw']['hz']:>12.1f} {row['wrist/image_raw']['hz']:>9.1f} "
              f"{row['joint_states']['hz']:>15.1f} {row['joint_states']['max_gap_ms']:>13.0f}  {loads[name]:>21}")
    full, fast = rows["full meshes"], rows["decimated meshes"]
    print("decimated / full: " + ", ".join(f"{t} {fast[t]['hz'] / max(full[t]['hz'], 1e-9):.2f}x" for t in TOPICS))


if __name__ == "__main__":
    main()
