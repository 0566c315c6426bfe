"""How the docs walk treats each command of the README and docs/: the "Try it small" items (docs/getting-started.md)
and one rule per kind of command."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The "Try it small" note of docs/getting-started.md, item for item: what each kind of command takes to run small.
SMALL = {
    "sgvla eval": "tasks=[0] episodes=1",
    "sgvla demos generate": "--tasks 0 --episodes 1",
    "sgvla record": "--episodes 1 --episode-time 5 --reset-time 0",
    "sgvla launch sim_eval": "eval_overrides=\"tasks=[0] episodes=1\"",
    "sgvla launch hardware": "episodes=1 episode_time_s=5 reset_time_s=0",
}


@dataclass(frozen=True)
class Rule:
    """How the walk treats the commands matching `pattern`: `run` (exit 0), `fails` (exit != 0 and `message` in
    the output: commands marked `needs:`), `launch` (started, stopped with SIGINT after `ready` shows, a clean
    exit), `help` (a synopsis line: `sgvla CMD --help` exits 0), or `not_run` (`why`: it must not run here)."""

    pattern: str
    how: str
    message: str = ""
    ready: str = ""
    why: str = ""
    small: bool = True
    timeout_s: float = 900.0
    env: dict = field(default_factory=dict)


# First match wins. Synopsis lines (metavariables in capitals, [options], a|b) are checked through --help.
ARM = r"/dev/(tty|video)|RealSense|config file not found|not a terminal"  # no device, or no rig file of yours
HUB = r"hub|huggingface|Name or service not known|model=DIR"
RULES = (
    Rule(r"needs:.*\bsecond terminal\b", "not_run",
         why="runs beside another command, in a second terminal, on what that one prints or makes"),
    Rule(r"needs:.*\bbag of yours\b", "fails", message=r"no such bag"),
    Rule(r"needs:.*\bthe arm's bag\b", "fails", message=r"no such bag|is not in runs/"),  # none, or a failed launch's
    Rule(r"needs:.*\b(leader )?arm\b", "fails", message=ARM),
    Rule(r"needs:.*\bhub\b", "fails", message=HUB),
    Rule(r"needs:.*\bros2\b", "fails", message=r"ros2: command not found"),
    Rule(r"needs:.*\bslurm\b", "fails", message=r"shard"),
    Rule(r"needs:.*\bimages\b", "fails", message=r"no images"),
    Rule(r"needs:.*\bray cluster\b", "not_run",
         why="HEAD is a placeholder host name: looking it up would ask a DNS server, off loopback"),
    Rule(r"needs:.*\bgpu\b", "not_run", why="LeRobot falls back to the CPU and would train for hours"),
    # The make targets run `make install` first, and install.sh installs into the .venv of the folder it is run
    # from: in the walk's folder (the checkout's entries linked in) a reinstall would write that folder's paths into
    # the checkout's venv (its commands' #! lines), which outlives the folder. `make test-readme` ran `make install`
    # before the walk; the main job's own command (`sgvla eval --config config/eval/default.yaml`) is walked on
    # docs/evaluating.md; the test targets are the suite this walk belongs to.
    Rule(r"^make install$", "not_run", why="make test-readme ran it before the walk, in the checkout itself"),
    Rule(r"^make eval$", "not_run", why="it runs make install in the walk's linked folder; docs/evaluating.md walks "
                                        "its command, sgvla eval --config config/eval/default.yaml"),
    Rule(r"^make test(-fast|-readme)?$", "not_run", why="the test suite itself: CI runs make test (.ci/run)"),
    Rule(r"^source \.venv/bin/activate$", "run"),
    Rule(r"^sgvla$", "run"),
    # Synopsis lines (metavariables in capitals, [options], a|b, ...) are checked through --help.
    Rule(r"^sgvla \S+.*(\s\[|\b[A-Z][A-Z_]{2,}\b|\w\|\w|\.\.\.)", "help"),
    Rule(r"^sgvla (sim-bus|markers|report|merge|demos|annotate|make-tiny-\w+|vlm-bench|vlm-annotate)$", "help"),
    Rule(r"^sgvla launch hardware .*record=", "run", timeout_s=900),  # ends after its episodes
    Rule(r"^sgvla launch so101_eval sim=true .*record=", "run", timeout_s=900),  # ends after its plan
    Rule(r"^python -m lerobot_robot_so101_twin sim-leader\b", "launch", ready="leader port:"),
    Rule(r"^lerobot-eval\b", "run", small=False, timeout_s=1800),
    Rule(r"^python -c\b", "run", small=False),
    Rule(r"^sgvla bag2dataset\b", "run"),
    Rule(r"^sgvla launch (hardware|so101_eval)\b(?!.*--table)", "launch", ready="] [INFO] ["),
    Rule(r"^sgvla launch sim_eval\b", "run", timeout_s=1800),
    Rule(r"^sgvla launch \S+ --table$", "run"),
    Rule(r"^sgvla (eval|demos generate|record)\b", "run", timeout_s=1800),
    Rule(r"^sgvla (doctor|report|merge|annotate|make-tiny-\w+|vlm-bench|vlm-annotate|markers)\b", "run"),
)


def rule_for(text: str, comment: str) -> Rule | None:
    line = f"{text}  # {comment}" if comment else text
    for rule in RULES:
        if re.search(rule.pattern, line if "needs:" in rule.pattern else text):
            return rule
    return None


def small_items(text: str) -> str:
    for prefix, items in SMALL.items():
        if text.startswith(prefix):
            return items
    return ""
