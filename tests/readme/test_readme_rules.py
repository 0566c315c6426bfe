"""Part of `make test` (fast): every README block reads as shell, YAML or Python, and the README walk
(`test_readme_walk.py`, `make test-readme`) has a rule for every README command, so a new command cannot slip by."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from readme_commands import commands  # noqa: E402
from walk_rules import rule_for  # noqa: E402

CMDS, OTHER_BLOCKS = commands()


def test_every_block_is_shell_yaml_or_python():
    """A block the walk cannot read (not shell, not a YAML plan fragment, not Python) is a README error."""
    assert [b for b in OTHER_BLOCKS if b.kind not in ("yaml", "python")] == []


def test_every_command_has_a_rule():
    unknown = [str(c) for c in CMDS if rule_for(c.text, c.comment) is None]
    assert unknown == [], f"README commands the walk does not know how to treat (add a rule): {unknown}"


def test_commands_are_joined_and_marked():
    """Continuation lines join, comments go, `needs:` marks are read, and a `#` inside quotes stays."""
    text = ("## S\n\n    sgvla eval a=1 \\\n        b='x # y'   # comment; needs: arm, hub\n"
            "    # a comment line\n    sgvla doctor\n\nA plan:\n\n    key: {a: 1}\n")
    cmds, others = commands(text)
    assert [(c.text, c.needs, c.section) for c in cmds] == [("sgvla eval a=1 b='x # y'", ("arm", "hub"), "S"),
                                                           ("sgvla doctor", (), "S")]
    assert [b.kind for b in others] == ["yaml"]
    assert rule_for("sgvla frobnicate now", "") is None
