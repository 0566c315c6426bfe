"""The `sgvla` command: version, doctor, and clear errors."""

import subprocess
import sys

import sgvla
from sgvla.cli import doctor
from sgvla.cli import main


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as e:
        assert e.code == 0
    assert capsys.readouterr().out.strip() == f"sgvla {sgvla.__version__}"


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "sgvla.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("sgvla ")


def test_doctor_reports_every_component():
    checks = doctor.run_checks()
    names = {c.component for c in checks}
    assert {"python", "rclpy", "sgvla_interfaces", "mujoco", "MUJOCO_GL=egl", "LIBERO", "lerobot",
            "torch", "ffmpeg"} <= names
    # The install script installs all of it, so nothing is missing here.
    failed = [c for c in checks if c.status == doctor.FAIL]
    assert not failed, failed


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
