"""A launched node's stderr: passed on to this process's stderr line by line, prefixed by the node's name, with the
node's last error lines kept, so that `sgvla launch` can say which node failed first and what it said.

An error line is a ROS log line at ERROR or FATAL (``[FATAL] [<time>] [<node>]: <message>``, kept as the message),
the exception line that ends a Python traceback (``CameraError: camera wrist: ...``) or the line with which
faulthandler reports a crash in native code (``Fatal Python error: Segmentation fault``; the nodes enable it).
Without any, the node's last line that is not a ROS log line stands for its error (plain output such as a
native library's message); a ROS line below ERROR (``[INFO] ... ready``) is never quoted as an error: a node
killed by a signal while all was well has no error line, and `exited` says so, with its last line as what it did.
"""

from __future__ import annotations

import re
import sys
import threading
from collections import deque
from typing import BinaryIO

ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colours of rcutils' console output (RCUTILS_COLORIZED_OUTPUT)
ROS_ERROR = re.compile(r"^\[(?:ERROR|FATAL)\] \[[\d.]+\] \[[^\]]*\]: (?P<message>.*)$")
ROS_LOG = re.compile(r"^\[(?:DEBUG|INFO|WARN|WARNING)\] \[[\d.]+\] \[[^\]]*\]: ")
KEEP = 5  # error lines and last lines kept per node


class NodeOutput:
    """Follows one node's stderr pipe on a thread of its own until the pipe ends (the node and its children exit)."""

    def __init__(self, name: str, pipe: BinaryIO, prefix: bool = True, sink: BinaryIO | None = None):
        self.name = name
        self.errors: deque[str] = deque(maxlen=KEEP)
        self.tail: deque[str] = deque(maxlen=KEEP)
        self._prefix = f"[{name}] ".encode() if prefix else b""
        self._sink = sink if sink is not None else sys.stderr.buffer
        self._in_traceback = False
        self._thread = threading.Thread(target=self._follow, args=(pipe,), name=f"output of {name}", daemon=True)
        self._thread.start()

    def _follow(self, pipe: BinaryIO) -> None:
        with pipe:
            for raw in iter(pipe.readline, b""):
                line = raw if raw.endswith(b"\n") else raw + b"\n"
                try:
                    self._sink.write(self._prefix + line)
                    self._sink.flush()
                except (OSError, ValueError):  # the terminal went away: keep reading, or the node blocks on writing
                    pass
                self.take(line.decode(errors="replace").rstrip())

    def take(self, line: str) -> None:
        """Remember `line` (one line of the node's stderr, without its newline)."""
        line = ANSI.sub("", line)
        if not line.strip():
            return
        self.tail.append(line)
        match = ROS_ERROR.match(line)
        if match:
            self.errors.append(match["message"])
        elif line.startswith("Fatal Python error: "):
            self.errors.append(line)
        elif line.startswith("Traceback (most recent call last):"):
            self._in_traceback = True
        elif self._in_traceback and not line[0].isspace():
            self.errors.append(line)  # the exception that ended the traceback
            self._in_traceback = False

    def last_error(self) -> str:
        """Its last error line; else its last line that is no ROS log line; else ""."""
        if self.errors:
            return self.errors[-1]
        plain = [line for line in self.tail if not ROS_LOG.match(line)]
        return plain[-1] if plain else ""

    def last_line(self) -> str:
        return self.tail[-1] if self.tail else ""

    def wait(self, timeout_s: float) -> None:
        """Until the pipe has ended (everything the node wrote is in), at most `timeout_s`."""
        self._thread.join(timeout_s)
