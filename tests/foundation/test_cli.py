"""The `sgvla` command: version, doctor, clear errors; one module per command in sgvla/cli, one override syntax."""

import argparse
import ast
import re
import subprocess
import sys

import pytest

import sgvla
from sgvla.cli import SUBCOMMANDS, build_parser, doctor, main
from sgvla.core.config import ConfigError
from sgvla.core.config import parse_items, parse_line
from sgvla.paths import REPO_ROOT

SGVLA = REPO_ROOT / "sgvla"


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as e:
        assert e.code == 0
    assert capsys.readouterr().out.strip() == f"sgvla {sgvla.__version__}"


@pytest.mark.integration
def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "sgvla.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("sgvla ")


@pytest.mark.integration
def test_doctor_reports_every_component():
    checks = doctor.run_checks()
    names = {c.component for c in checks}
    assert {"python", "rclpy", "sgvla_interfaces", "mujoco", "MUJOCO_GL=egl", "LIBERO", "lerobot",
            "torch", "ffmpeg"} <= names
    # The install script installs all of it, so nothing is missing here.
    failed = [c for c in checks if c.status == doctor.FAIL]
    assert not failed, failed


@pytest.mark.integration
def test_doctor_survives_a_broken_component(monkeypatch):
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    check = doctor.check_ffmpeg()
    assert check.status == doctor.FAIL and "apt-get install ffmpeg" in check.detail
    ok, detail = doctor._probe("import not_a_module_sgvla")
    assert not ok and "ModuleNotFoundError" in detail


def test_unknown_subcommand_is_a_clear_error(capsys):
    try:
        main(["frobnicate"])
    except SystemExit as e:
        assert e.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def subcommand_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command words, parser) of every command and nested action, e.g. ("calibrate", "camera")."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from subcommand_parsers(sub, (*path, name))


def test_every_command_is_a_module_of_sgvla_cli():
    for name, module in SUBCOMMANDS.items():
        path = SGVLA / "cli" / f"{module}.py"
        assert path.is_file(), name
        functions = {f.name for f in ast.parse(path.read_text()).body if isinstance(f, ast.FunctionDef)}
        assert "add_parser" in functions, name
        for words, sub in subcommand_parsers(build_parser(name)):
            func = sub.get_default("func")
            if func is not None:  # what the command (or its action) runs is defined in its own module
                assert func.__module__ == f"sgvla.cli.{module}" and func.__name__ in functions, words


def test_no_argument_parsing_outside_sgvla_cli():
    """Library modules hold what Python callers use; the command line is sgvla/cli's (the one `python -m` entry
    point left, the URDF generator's, is named here)."""
    entry_points = {SGVLA / "so101" / "urdf.py"}
    bad = []
    for path in sorted(SGVLA.rglob("*.py")):
        if (SGVLA / "cli") in path.parents or path in entry_points:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef) and node.name == "add_parser":
                bad.append(f"{path.relative_to(SGVLA.parent)} defines add_parser")
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{path.relative_to(SGVLA.parent)} imports argparse" for n in names if n == "argparse"]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("words", [(), *sorted(w for name in SUBCOMMANDS
                                                 for w, _ in subcommand_parsers(build_parser(name)))],
                         ids=lambda w: " ".join(w) or "sgvla")
def test_every_help_exits_0(words, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*words, "--help"])
    assert exit_.value.code == 0
    assert f"usage: sgvla {' '.join(words)}".strip() in capsys.readouterr().out


def test_record_and_launch_help_show_the_override_syntax(capsys):
    for command, shown, read in (("record", "follower.port=/dev/ttyACM0", "read as YAML"),
                                 ("launch", "sim=true teleop=leader", "read by the argument's type")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "key=value" in out or "name=value" in out, out
        assert shown in out and read in out, out
    assert main(["launch", "sim_eval", "--help"]) == 0  # after the launch name too
    assert "sim=true teleop=leader" in capsys.readouterr().out


def test_ros_syntax_is_refused_with_the_fix(capsys):
    assert main(["launch", "sim_eval", "stepping:=lockstep"]) == 2
    err = capsys.readouterr().err
    assert "write stepping=lockstep" in err and "Traceback" not in err, err
    assert main(["eval", "tasks:=[0]"]) == 2
    assert "write tasks=[0]" in capsys.readouterr().out


def test_override_items_are_one_syntax():
    assert parse_items(["tasks=[0,1]", "suite.render_profile=fast", "graph_source=vlm",
                        "graph_source.client=qwen2_5_vl_7b", "workers=2", "name="]) == {
        "tasks": [0, 1], "suite.render_profile": "fast", "graph_source": "vlm",
        "graph_source.client": "qwen2_5_vl_7b", "workers": 2, "name": None}
    # the ROS evaluator's `overrides` parameter: the same items in one shell-quoted string
    assert parse_line("tasks=[0] 'policies=[{type: expert}]'") == {"tasks": [0], "policies": [{"type": "expert"}]}
    for bad, message in (("tasks", "not of the form key=value"), ("tasks=[0", "the value is not YAML"),
                         ("{tasks: [0]}", "not of the form key=value")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_line(bad)


def test_key_value_items_may_come_between_options(tmp_path, capsys):
    """argparse alone takes a positional list in one piece; the items after an option still count."""
    assert main(["eval", "tasks=[0]", "--out", str(tmp_path), "seed_offset=-5"]) == 2
    assert "seed_offset must be >= 0, got -5" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["record", "--root", str(tmp_path), "--set", "follower.port=/dev/ttyACM0"])
    assert exit_.value.code == 2
    assert "record --set: key=value items need no flag; drop --set" in capsys.readouterr().err


@pytest.mark.integration
def test_doctor_loads_no_simulator():
    code = ("import sys, sgvla.cli.doctor as d; d.run_checks = lambda: []; from sgvla.cli import main; "
            "code = main(['doctor']); print(sorted(m for m in ('mujoco', 'torch', 'lerobot', 'rclpy', 'sgvla.plugins') "
            "if m in sys.modules)); sys.exit(code)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip().endswith("[]"), out.stdout + out.stderr


@pytest.mark.integration
def test_a_command_that_crashes_in_native_code_says_where(tmp_path):
    """A command killed by SIGSEGV (Mesa's renderer, a DDS thread) prints every thread's Python stack."""
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "sgvla.cli", "sim-bus", "--calibration-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("follower port:")  # serving, waiting for Ctrl-C
        time.sleep(0.2)
        proc.send_signal(signal.SIGSEGV)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in err and 'File "' in err and "sim_bus.py" in err, err
