"""Everything that touches the twin's MuJoCo model and data at once, for seconds, in a process of its own (so that a
crash in native code fails this test with its faulthandler report instead of ending pytest): physics on the
TwinClock's thread, two cameras each drawing on a render thread of its own (one with depth), LeRobot's Feetech bus
reading the servos and writing goals through the shared-memory twin bus, a reader of the privileged scene and its
ground-truth graphs, and scene resets from yet another thread (as the so101_twin node's twin/reset).

Issue 41: the so101_twin node died once by SIGSEGV with faulthandler showing its main thread in mj_step. Every user of
the model and data holds the twin's lock (physics, reset, scene reads, each camera's scene copy); the cameras draw
outside it, from the render model and their own scene. This keeps that so."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.sim, pytest.mark.integration]

STRESS = r"""
import faulthandler, json, math, sys, threading, time
faulthandler.enable()
import numpy as np
from lerobot.motors import Motor, MotorNormMode
from lerobot.motors.feetech import FeetechMotorsBus
from sgvla.so101.hardware.cameras import Camera, TwinCameraConfig, TwinSource
from sgvla.so101.hardware.joints import GRIPPER, JOINTS, MOTOR_IDS
from sgvla.so101.hardware.port import make_load_tolerant
from sgvla.so101.twin.bus import TwinClock, TwinFeetechBus
from sgvla.so101.twin.config import load_twin_config
from sgvla.so101.twin.twin import So101Twin

seconds, cap = float(sys.argv[1]), float(sys.argv[2])
twin = So101Twin(load_twin_config(), task_id=1)
twin.reset(3)
twin.render_model
configs = [TwinCameraConfig(name="agentview", width=128, height=96, fps=60, depth=True),
           TwinCameraConfig(name="wrist", width=128, height=96, fps=60)]
cameras = [Camera(c, TwinSource(c, twin)).start(120.0) for c in configs]
stop = threading.Event()
counts = {"scenes": 0, "resets": 0, "reads": 0, "writes": 0}
problems = []

def read_scenes():
    while not stop.is_set():
        scene = twin.scene()
        graphs = twin.ground_truth(None, scene)
        if not np.isfinite(scene.positions).all() or set(graphs) != set(twin.cameras):
            problems.append(f"scene {scene.positions.tolist()} graphs {sorted(graphs)}")
        twin.success()
        counts["scenes"] += 1

def reset_scenes():
    seed = 0
    while not stop.wait(0.7):
        seed += 1
        twin.reset(seed)
        counts["resets"] += 1

with TwinFeetechBus(twin) as sim:
    clock = TwinClock(twin, bus=sim).start()
    modes = {j: MotorNormMode.RANGE_0_100 if j == GRIPPER else MotorNormMode.DEGREES for j in JOINTS}
    bus = FeetechMotorsBus(sim.port, {j: Motor(MOTOR_IDS[j], "sts3215", modes[j]) for j in JOINTS}, sim.calibration)
    make_load_tolerant(bus)
    bus.connect()
    bus.enable_torque()
    threads = [threading.Thread(target=f, daemon=True) for f in (read_scenes, reset_scenes)]
    for t in threads:
        t.start()
    frames0 = [c.latest().index for c in cameras]
    ticks0 = clock.ticks
    rng = np.random.default_rng(0)
    start = time.monotonic()

    def enough():  # every part did some work: the CPU share each gets is the machine's, not the test's to set
        frames = [c.latest().index - f for c, f in zip(cameras, frames0)]
        return (min(frames) >= MIN["frames"] and clock.ticks - ticks0 >= MIN["ticks"]
                and all(counts[k] >= MIN[k] for k in ("scenes", "resets", "reads")))

    MIN = {"frames": 5, "ticks": 30, "scenes": 5, "resets": 3, "reads": 20}
    while time.monotonic() - start < seconds or (not enough() and time.monotonic() - start < cap):
        present = bus.sync_read("Present_Position")
        counts["reads"] += 1
        if not all(math.isfinite(v) for v in present.values()):
            problems.append(f"servo read {present}")
        goal = {j: v + float(rng.uniform(-15, 15)) for j, v in present.items() if j != GRIPPER}
        bus.sync_write("Goal_Position", goal)
        counts["writes"] += 1
    stop.set()
    for t in threads:
        t.join(timeout=10)
    counts["frames"] = [c.latest().index - f for c, f in zip(cameras, frames0)]
    counts["ticks"] = clock.ticks - ticks0
    counts["seconds"] = round(time.monotonic() - start, 1)
    clock.close()
    bus.disconnect(disable_torque=False)
for c in cameras:
    c.close()
twin.close()
print(json.dumps({**counts, "problems": problems[:5]}), flush=True)
"""


def test_physics_cameras_bus_and_scene_reads_share_the_twin_without_crash_or_torn_state():
    # 6 s at least, and on until every part did its share of work (at most 240 s: a machine that slow fails it)
    done = subprocess.run([sys.executable, "-c", STRESS, "6", "240"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MUJOCO_GL": "egl"})
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "Fatal Python error" not in out, out[-6000:]
    stats = json.loads(done.stdout.strip().splitlines()[-1])
    print(stats)
    assert stats["problems"] == [], stats
    # Each part did work meanwhile (beside four busy processes 6 s gave 4 frames and 12 ticks: the stress runs on).
    assert min(stats["frames"]) >= 5 and stats["ticks"] >= 30 and stats["reads"] >= 20, stats
    assert stats["scenes"] >= 5 and stats["resets"] >= 3 and stats["writes"] >= 20, stats
