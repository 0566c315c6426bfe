"""The README and every page of docs/ as a new user meets them: every shell command of a page's code blocks, in
order, in a fresh working folder of the page's own (HOME there too; the checkout's tracked top-level entries linked
in, as `cd` into a checkout gives), in a shell where `source .venv/bin/activate` has run (the docs' one command
form: the venv is not on the walk's own PATH). Each command either runs as written and exits 0 (long ones with the
items of the "Try it small" note appended, nothing else), or the page marks what it needs (`# ... needs: arm`) and
it must fail, saying so, or it is a launch, started and stopped with Ctrl-C once ready. A command this file has no
rule for fails the walk, so no documented command goes untested. `make test-readme`; one page: `-k so101_twin`."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from readme_commands import ACTIVATE, README, all_commands  # noqa: E402
from walk_rules import Rule, rule_for, small_items  # noqa: E402

pytestmark = [pytest.mark.readme, pytest.mark.slow]

REPO = README.parent
VENV_BIN = REPO / ".venv" / "bin"

CMDS, OTHER_BLOCKS = all_commands()


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory):
    """Per page, a fresh folder with the checkout's tracked top-level entries and its .venv linked in, HOME inside
    it: a page's commands depend on nothing but the commands above them on that page."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    # The venv too: `source .venv/bin/activate` runs from the checkout where `make install` made it.
    tops = sorted({line.split("/")[0] for line in tracked.splitlines()} | {".venv"})
    made = {}

    def workdir(page: str) -> Path:
        if page not in made:
            root = made[page] = tmp_path_factory.mktemp(re.sub(r"\W+", "_", page))
            for top in tops:
                if not (root / top).exists():
                    (root / top).symlink_to(REPO / top)
            (root / "home").mkdir()
        return made[page]

    return workdir


def _env(workdir: Path) -> dict:
    """The user's environment, HOME in the folder, and the venv off the PATH: the command's shell activates it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROS_", "SGVLA_", "PYTEST", "VIRTUAL_ENV"))}
    path = [p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep) if Path(p) != VENV_BIN]
    env.update(HOME=str(workdir / "home"), PATH=os.pathsep.join(path))
    return env


def _shell(text: str) -> list[str]:
    """The command as a user types it after the docs' activation line."""
    return ["bash", "-c", f"{ACTIVATE}\n{text}"]


def _section_id(c) -> str:
    page = Path(c.page).stem.replace("-", "_")
    return f"{page}-{c.line}-{re.sub(r'[^A-Za-z0-9]+', '_', c.section)[:24]}"


@pytest.mark.parametrize("cmd", CMDS, ids=[_section_id(c) for c in CMDS])
def test_readme_command(cmd, workdirs):
    workdir = workdirs(cmd.page)
    rule = rule_for(cmd.text, cmd.comment)
    assert rule is not None, f"no rule for {cmd}"
    # `cmd &` on a page starts a launch for the next command; the walk starts and stops it as every launch.
    text = cmd.text.removesuffix("&").strip() if rule.how == "launch" else cmd.text
    if rule.how == "not_run":
        pytest.skip(f"{cmd}: {rule.why}")
    if rule.how == "help":
        words = shlex.split(text.replace("|", " "))
        text = " ".join(words[:3 if words[1] in ("demos", "calibrate") else 2]) + " --help"
    elif rule.how in ("run", "launch") and small_items(text) and "eval_overrides=" not in text:
        text = f"{text} {small_items(text)}"
    started = time.monotonic()
    if rule.how == "launch":
        out, code = _launch(text, workdir, rule)
    else:
        try:
            done = subprocess.run(_shell(text), cwd=workdir, env=_env(workdir), capture_output=True,
                                  text=True, timeout=rule.timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"{cmd}: still running after {rule.timeout_s:.0f} s ({text}); output: {e.output!r}")
        out, code = done.stdout + done.stderr, done.returncode
    took = time.monotonic() - started
    print(f"[docs walk] {cmd.page}:{cmd.line}: {text} -> exit {code} in {took:.1f} s")
    tail = out[-3000:]
    if rule.how == "fails":
        assert code != 0, f"{cmd} needs {cmd.needs} but exited 0 here: {tail}"
        assert re.search(rule.message, out, re.I), f"{cmd} failed without saying {rule.message!r}: {tail}"
    else:
        assert code == 0, f"{cmd} (run as: {text}) exited {code} after {took:.0f} s: {tail}"


def _launch(text: str, workdir: Path, rule: Rule) -> tuple[str, int]:
    """Start a launch, wait for `ready` in its output, Ctrl-C it; the launch must stop its nodes and exit."""
    log = workdir / f"launch_{time.monotonic_ns()}.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(_shell(f"exec {text}"), cwd=workdir, env=_env(workdir), stdout=f,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while rule.ready not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        if proc.poll() is not None:  # ended by itself (a refusal): its exit code stands
            return log.read_text(), proc.returncode
        assert rule.ready in log.read_text(), f"{text}: not ready after 300 s: {log.read_text()[-2000:]}"
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out = log.read_text()
    assert "stopping the nodes" in out, f"{text}: no orderly stop after Ctrl-C: {out[-2000:]}"
    # Ctrl-C is how a launch ends: it exits 0 or with SIGINT's 130, never by a crash or a hang.
    return out, 0 if code in (0, 130) else code
