"""`sgvla record` refuses at once, with a message and exit 2, what it used to wait on forever or crash on: no
terminal to read keys from without --auto, and a dataset folder that is a file."""

import os
import pty
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration  # starts processes (tests/tiers.py)

RECORD = [sys.executable, "-m", "sgvla.cli", "record", "--task", "t"]


def test_without_auto_and_without_a_terminal_it_says_to_use_auto(tmp_path):
    for stdin in (subprocess.DEVNULL, subprocess.PIPE):  # nothing to read / a pipe nobody writes keys into
        out = subprocess.run([*RECORD, "--root", str(tmp_path / "ds")], stdin=stdin, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 2, out.stderr
        assert "stdin is not a terminal" in out.stderr and "--auto" in out.stderr and "record_control" in out.stderr
        assert "Traceback" not in out.stderr
    assert not (tmp_path / "ds").exists()  # refused before anything was made (or loaded, or connected)


def test_a_root_that_is_a_file_is_a_message_not_a_traceback(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a dataset")
    for root in (a_file, a_file / "ds"):
        out = subprocess.run([*RECORD, "--root", str(root), "--auto"], stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 2, out.stderr
        assert f"--root {root}: {a_file} is a file; name a folder" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


def test_a_terminal_on_stdin_passes_the_check(tmp_path):
    """With a terminal the keys can come: the check lets it through, here to the next one (the root is a file)."""
    a_file = tmp_path / "a_file"
    a_file.write_text("not a dataset")
    primary, secondary = pty.openpty()
    try:
        out = subprocess.run([*RECORD, "--root", str(a_file)], stdin=secondary, capture_output=True, text=True,
                             timeout=60)
    finally:
        os.close(secondary)
        os.close(primary)
    assert out.returncode == 2 and "stdin is not a terminal" not in out.stderr, out.stderr
    assert f"{a_file} is a file" in out.stderr, out.stderr
