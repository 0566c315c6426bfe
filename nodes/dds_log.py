"""Fast DDS's own warnings, on request: `SGVLA_DDS_LOG=warning` (or `info`, `error`) in a process's environment.

Fast DDS prints only its errors by default, and rcl never hands a ROS log level down to it, so a transport that
quietly stops one path says nothing: a shared-memory port reset as a zombie of a killed process or as not healthy
(its listener did not answer within a second), a port whose queue is full. Those are warnings. rmw_fastrtps sets
Fast DDS's verbosity in `rmw_set_log_severity`, which no ROS tool calls; this does. Every sgvla node applies it at
start (runtime.init); a plain rclpy script calls `apply_dds_log_level()` before `rclpy.init`.

Opt-in because it is noisy: at `warning` each participant also prints about a dozen QoS consistency warnings about
rmw's own topics, and a few more as it shuts down."""

import ctypes
import os
from collections.abc import Mapping

ENV = "SGVLA_DDS_LOG"
# rmw_log_severity_t (rmw/types.h): the rcutils severities.
SEVERITIES = {"debug": 10, "info": 20, "warning": 30, "error": 40}
RMW = "rmw_fastrtps_cpp"  # the RMW_IMPLEMENTATION sgvla.core.ros_env sets
LIBRARY = f"lib{RMW}.so"


def dds_log_level(environ: Mapping[str, str] = os.environ) -> str | None:
    """The level asked for in `environ` (None: Fast DDS's default); ValueError naming the valid ones otherwise."""
    level = environ.get(ENV, "").strip().lower()
    if not level:
        return None
    if level not in SEVERITIES:
        raise ValueError(f"{ENV}={environ[ENV]!r}: expected one of {', '.join(SEVERITIES)} (or unset)")
    if environ.get("RMW_IMPLEMENTATION", RMW) != RMW:
        raise ValueError(f"{ENV} sets Fast DDS's verbosity, but RMW_IMPLEMENTATION is {environ['RMW_IMPLEMENTATION']}")
    return level


def apply_dds_log_level(environ: Mapping[str, str] = os.environ) -> str | None:
    """Set Fast DDS's verbosity to the level in `environ`, if any; returns it. Errors name the variable."""
    level = dds_log_level(environ)
    if level is None:
        return None
    try:
        rmw = ctypes.CDLL(LIBRARY)
    except OSError as e:
        raise RuntimeError(f"{ENV}={level}: cannot load {LIBRARY} to set Fast DDS's verbosity: {e}") from e
    rmw.rmw_set_log_severity.argtypes = [ctypes.c_int]
    rmw.rmw_set_log_severity.restype = ctypes.c_int
    if rmw.rmw_set_log_severity(SEVERITIES[level]) != 0:
        raise RuntimeError(f"{ENV}={level}: rmw_set_log_severity refused it")
    return level
