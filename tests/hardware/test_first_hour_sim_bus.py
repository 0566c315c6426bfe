"""`sgvla sim-bus` writes the simulated arms' calibration files into the user's cache folder, printed, not into the
folder it was started from; --calibration-dir still chooses another."""

import json
import os
import signal
import subprocess
import sys

import pytest

from ..waiting import read_until

pytestmark = pytest.mark.integration  # starts processes (tests/tiers.py)


def serve(cwd, env, *extra) -> tuple[list[str], str, int]:
    """The lines `sgvla sim-bus` printed up to "Ctrl-C stops.", the rest of its output after Ctrl-C, its exit code."""
    proc = subprocess.Popen([sys.executable, "-m", "sgvla.cli", "sim-bus", *extra], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = read_until(proc, "Ctrl-C stops.", 120)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return lines, rest, proc.returncode


def test_calibration_goes_to_the_cache_not_the_current_folder(tmp_path):
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    lines, rest, code = serve(work, {**os.environ, "XDG_CACHE_HOME": str(cache)})
    text = "".join(lines)
    folder = cache / "sgvla" / "sim_calibration"
    assert code == 0 and "leader bus:" in rest, text + rest
    assert f"calibration:   {folder}/\n" in text, text
    assert f"follower.calibration_dir={folder}" in text  # the printed `sgvla record` line uses it
    assert {p.name for p in folder.iterdir()} == {"so101_follower.json", "so101_leader.json"}
    assert json.loads((folder / "so101_follower.json").read_text())  # LeRobot's calibration file
    assert list(work.iterdir()) == []  # nothing written where it was started


def test_an_explicit_folder_is_used(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    lines, rest, code = serve(work, {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
                              "--calibration-dir", str(tmp_path / "mine"))
    assert code == 0, "".join(lines) + rest
    assert (tmp_path / "mine" / "so101_leader.json").is_file() and not (tmp_path / "cache").exists()
    assert list(work.iterdir()) == []
