"""LeRobot's video encoder (SVT-AV1) must not leave sgvla's threads on a real-time policy (sgvla/core/sched.py)."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration  # starts processes (tests/tiers.py)

ENCODE = """
import os, sys
import av, numpy as np
from sgvla.core.sched import no_realtime, is_realtime

def policies():
    return {int(open(f"/proc/self/task/{t}/stat").read().rsplit(")", 1)[1].split()[38])
            for t in os.listdir("/proc/self/task")}

def encode():
    out = av.open(os.devnull, "w", format="mp4")
    stream = out.add_stream("libsvtav1", rate=30)
    stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
    seen = set()
    for i in range(4):
        for packet in stream.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), 9 * i, np.uint8), "rgb24")):
            out.mux(packet)
        seen |= policies()
    for packet in stream.encode():
        out.mux(packet)
    out.close()
    return seen

if sys.argv[1] == "guarded":
    with no_realtime():
        seen = encode()
else:
    seen = encode()
print("threads", sorted(seen), "after", int(is_realtime()))
"""


def run(mode: str) -> str:
    proc = subprocess.run([sys.executable, "-c", ENCODE, mode], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


def test_video_encoding_runs_and_ends_on_the_normal_policy():
    # Every thread of the process, the encoder's workers included, stays SCHED_OTHER (0), during and after.
    assert run("guarded") == "threads [0] after 0"


def test_without_the_guard_the_encoder_makes_the_caller_real_time_where_it_may():
    import os

    line = run("bare")
    if os.geteuid() == 0:  # the cause sgvla guards against: root may raise priorities, and SVT-AV1 does
        assert line.endswith("after 1") and "1" in line.split("after")[0], line
    else:
        assert line == "threads [0] after 0"
