"""What `sgvla launch` quotes of a node that exited first: its last ROS error line (colours and prefix stripped), or
the exception that ended a traceback, or else its last line; everything passes on, prefixed by the node's name."""

import io
import os
import subprocess
import sys
import time

import pytest

from sgvla.launch.node_output import NodeOutput
from sgvla.launch import run
from sgvla.launch.run import exited

TRACEBACK = b"""[INFO] [1795682010.1] [evaluator]: ready
Traceback (most recent call last):
  File "x.py", line 1, in <module>
    raise KeyError("plan")
KeyError: 'plan'
"""


def follow(data: bytes) -> tuple[NodeOutput, bytes]:
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    sink = io.BytesIO()
    output = NodeOutput("evaluator", os.fdopen(read, "rb"), sink=sink)
    output.wait(10)
    return output, sink.getvalue()


def test_the_last_ros_error_line_is_quoted_without_its_colours_and_prefix():
    output, passed_on = follow(b"[INFO] [1.5] [evaluator]: ready\n\x1b[31m[ERROR] [2.5] [evaluator]: node graph not "
                               b"ready: node sim_bridge\x1b[0m\n[INFO] [3.5] [evaluator]: records: ...")
    assert output.last_error() == "node graph not ready: node sim_bridge"
    assert passed_on.splitlines()[0] == b"[evaluator] [INFO] [1.5] [evaluator]: ready"
    assert passed_on.endswith(b"[evaluator] [INFO] [3.5] [evaluator]: records: ...\n")  # a last line without newline


def test_a_traceback_is_quoted_by_its_exception_and_plain_output_by_its_last_line():
    assert follow(TRACEBACK)[0].last_error() == "KeyError: 'plan'"
    assert follow(b"starting\nsomething odd happened\n\n")[0].last_error() == "something odd happened"
    assert follow(b"")[0].last_error() == ""


def test_a_crash_in_native_code_is_quoted_by_faulthandlers_line():
    crash = (b"[FATAL] [1.5] [teleop_recorder]: cannot start: ArmError: follower port not found\n"
             b"Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n"
             b'  File "/x/runtime.py", line 98 in spin_until_stopped\n')
    assert follow(crash)[0].last_error() == "Fatal Python error: Segmentation fault"


def test_a_node_killed_while_all_was_well_is_not_quoted_an_info_line_as_its_error():
    output, _ = follow(b"[INFO] [1.5] [evaluator]: ready\n[WARN] [2.5] [evaluator]: slow step\n"
                       b"[INFO] [3.5] [evaluator]: episode 4: success=True\n")
    assert output.last_error() == ""
    assert exited("evaluator exited first", -9, output) == (
        "evaluator exited first (killed by SIGKILL) without an error message; its last line: "
        "[INFO] [3.5] [evaluator]: episode 4: success=True")


@pytest.mark.integration
def test_nodes_failing_at_start_after_the_first_are_named_too():
    """A rig with two devices missing: the node that fails second is quoted as well; one still running is left to
    be stopped, after at most ALSO_FAILED_S."""
    def node(script: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE)

    procs = {"camera": node("import sys; sys.exit(1)"),
             "arm": node("import sys, time; time.sleep(1); print('[FATAL] [1.5] [arm]: cannot start: ArmError: "
                         "follower port not found', file=sys.stderr); sys.exit(1)"),
             "recorder": node("import time; time.sleep(60)")}
    outputs = {name: NodeOutput(name, p.stderr, sink=io.BytesIO()) for name, p in procs.items()}
    try:
        procs["camera"].wait(30)
        began = time.monotonic()
        also = run._also_failing(procs, outputs, "camera")
        assert time.monotonic() - began < run.ALSO_FAILED_S + 2
    finally:
        procs["recorder"].kill()
        procs["recorder"].wait()
    assert also == ("arm failed too (exit 1): cannot start: ArmError: follower port not found",)
