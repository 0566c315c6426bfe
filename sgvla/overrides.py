"""The one override syntax of sgvla: `key=value` items, each read by `sgvla.core.config.parse_override` (the value
as YAML, dotted keys reaching nested fields and a registered choice's options). The `sgvla` commands take them as
arguments (`sgvla eval tasks=[0]`, `sgvla record follower.port=/dev/ttyACM0`, `sgvla launch sim_eval
stepping=free_running`); the ROS evaluator's `overrides` parameter as one shell-quoted string."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any

import yaml

from sgvla.core.config import ConfigError, parse_override

SYNTAX = ("the value is read as YAML (tasks=[0,1] is a list, workers=2 a number, true a boolean; quote text YAML "
          "would read otherwise), dotted keys reach nested fields and a registered choice's options "
          "(suite.render_profile=fast)")  # for --help texts


def parse_items(items: Iterable[str], what: str = "override") -> dict[str, Any]:
    """`key=value` items as one mapping (a later item wins); ROS's `name:=value` and values that are not YAML are
    errors (`ConfigError`) naming the item."""
    out: dict[str, Any] = {}
    for item in items:
        name, ros, value = item.partition(":=")
        if ros and "=" not in name:
            raise ConfigError(f"{what} {item!r}: write {name}={value} (sgvla takes key=value; := is ros2 launch's)")
        try:
            key, parsed = parse_override(item)
        except yaml.YAMLError as e:
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise ConfigError(f"{what} {item!r}: the value is not YAML ({problem}); quote it") from None
        out[key] = parsed
    return out


def parse_line(text: str, what: str = "override") -> dict[str, Any]:
    """`parse_items` of one string of space-separated, shell-quoted items (`tasks=[0] 'policies=[{type: expert}]'`)."""
    try:
        items = shlex.split(text)
    except ValueError as e:
        raise ConfigError(f"{what}s {text!r}: {e} (key=value items, space-separated, shell-quoted)") from None
    return parse_items(items, what)
