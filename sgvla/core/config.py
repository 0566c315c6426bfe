"""Typed configuration: YAML files loaded into dataclasses, with errors that name file and key.

Every config of sgvla is a dataclass; its YAML file may set any subset of the fields. Unknown
keys, wrong types and bad values are errors that say which file and which key, since a typo in
an evaluation plan should stop the run before the first episode, not after the hundredth.
"""

import dataclasses
import shlex
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from sgvla.core.registry import Choice, UnknownChoice

T = TypeVar("T")


class ConfigError(ValueError):
    pass


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {list(args)}")
        return value
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, option, where)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0])
    if Choice.is_kind(hint):
        return _choice(value, hint, where)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping for {hint.__name__}, got {value!r}")
        return from_mapping(hint, value, where)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        item = args[0] if args else Any
        items = [_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {str(k): _coerce(v, args[1] if args else Any, f"{where}.{k}") for k, v in value.items()}
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float, str, bool):
        if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
            raise ConfigError(f"{where}: expected {hint.__name__}, got {value!r}")
        return value
    return value


def _choice(value: Any, kind: type[Choice], where: str) -> Choice:
    """A registered choice from its name or from a mapping with `type` and its options."""
    if isinstance(value, Choice):
        return value
    if isinstance(value, str):
        name, options = value, {}
    elif isinstance(value, Mapping):
        options = dict(value)
        name = options.pop(kind._key, None) or getattr(kind, "type", "")
        if not name:
            raise ConfigError(f"{where}: a {kind._kind} needs a `{kind._key}`; choose from {sorted(kind.choices())}")
    else:
        raise ConfigError(f"{where}: expected a {kind._kind} name or a mapping with `{kind._key}`, got {value!r}")
    try:
        cls = kind.choice(name)
    except UnknownChoice as e:
        raise ConfigError(f"{where}: {e}") from None
    return from_mapping(cls, options, f"{where}({name})")


def to_mapping(obj: Any) -> Any:
    """A config as plain data that `from_mapping` reads back: registered choices keep their name (`type`)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        data = {f.name: to_mapping(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
        return {obj._key: obj.type, **data} if isinstance(obj, Choice) else data
    if isinstance(obj, (list, tuple)):
        return [to_mapping(v) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): to_mapping(v) for k, v in obj.items()}
    return obj


def _with_default_type(value: Any, hint: Any, f: dataclasses.Field) -> Any:
    """Options of a registered-choice field given without `type` keep the field's default choice."""
    if Choice.is_kind(hint) and isinstance(value, Mapping) and hint._key not in value:
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if isinstance(default, Choice):
            return {hint._key: default.type, **value}
    return value


def from_mapping(cls: type[T], data: Mapping[str, Any], where: str = "config") -> T:
    """Build dataclass `cls` from a mapping; nested dataclasses and lists are converted too. A kind of registered
    choice (a `Choice` base, not one of its choices) is built as the choice the mapping names (`type: ...`)."""
    if Choice.is_kind(cls) and not cls.type:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a mapping with `{cls._key}`, got {data!r}")
        return _choice(data, cls, where)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    moved = [f"{where}.{k}: {getattr(cls, 'MOVED', {})[k]}" for k in unknown if k in getattr(cls, "MOVED", {})]
    if moved:  # a key the config took once: where it went
        raise ConfigError("; ".join(moved))
    if unknown:
        valid = f"valid keys: {', '.join(sorted(fields))}" if fields else "it takes no options"
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; {valid}")
    missing = [k for k, f in fields.items() if k not in data
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{where}: missing key(s) {', '.join(missing)}")
    hints = typing.get_type_hints(cls)
    data = {k: _with_default_type(v, hints[k], fields[k]) for k, v in data.items()}
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None


def load_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({e})") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return dict(data)


def load_config(cls: type[T], path: str | Path, overrides: Mapping[str, Any] | None = None,
                source: str = "command line") -> T:
    """Load `cls` from a YAML file, then apply `key=value` overrides (dotted keys reach nested fields). `cls` may be a
    kind of registered choice: the file names the choice (`type: openai`) and sets its options.

    An error that an override brings in is blamed on that override, not on the file (`command line: episodes=x:
    episodes: expected int, got 'x'`; `source` says where the overrides came from): the file may be the shipped plan
    the user never touched, and an error naming it sends them to the wrong place."""
    data = load_yaml(path)
    try:
        return from_mapping(cls, apply_overrides(data, overrides), str(path))
    except ConfigError as e:
        raise _blame(cls, data, dict(overrides or {}), e, str(path), source) or e from None


def _blame(cls: type, data: dict, overrides: dict[str, Any], error: ConfigError, where: str,
           source: str) -> ConfigError | None:
    """`error` (of the file with all overrides) reworded to name the overrides it comes from: those without which
    the error goes away or becomes another. None when the file alone is already invalid (the file's error stands)
    or no override is implicated."""
    def outcome(items: dict) -> str:
        try:
            from_mapping(cls, apply_overrides(data, items), where)
        except ConfigError as e:
            return str(e)
        return ""

    text = str(error)
    if not overrides or outcome({}):
        return None
    implicated = [key for key in overrides if outcome({k: v for k, v in overrides.items() if k != key}) != text]
    if not implicated:
        return None
    items = " ".join(f"{key}={_yaml_text(overrides[key])}" for key in implicated)
    rest = text[len(where):].lstrip(".: ") if text.startswith(where) else text
    return ConfigError(f"{source}: {items}: {rest}")


def _yaml_text(value: Any) -> str:
    """A value as the YAML an override item would write it (`x`, `[0, 1]`, `{type: expert}`)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1_000_000).strip()
    return text.removesuffix("...").strip()


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict:
    """`data` with `key=value` overrides applied (a copy where it changes): a dotted key reaches a nested mapping
    (`processor_kwargs.max_pixels=...`, `suite.render_profile=fast`); a registered choice given by name gains
    options (`graph_source: vlm` with `graph_source.client=x` becomes `{type: vlm, client: x}`)."""
    data = dict(data)
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for p in parents:
            if isinstance(node.get(p), str):  # a registered choice by name gains options: {type: name, ...}
                node[p] = {"type": node[p]}
            elif isinstance(node.get(p), Mapping):
                node[p] = dict(node[p])  # nested mappings are copied before they change, as `data` is
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {dotted}: {p} is not a mapping")
        node[leaf] = value
    return data


# -- the one override syntax ----------------------------------------------------------------------------------------
# `key=value` items, the value read as YAML, dotted keys reaching nested fields and a registered choice's options.
# The `sgvla` commands take them as arguments (`sgvla eval tasks=[0]`, `sgvla record follower.port=/dev/ttyACM0`,
# `sgvla launch sim_eval stepping=free_running`); the ROS evaluator's `overrides` parameter as one shell-quoted string.

def parse_override(text: str) -> tuple[str, Any]:
    """`key=value` with the value read as YAML (so `tasks=[0,1]` is a list, `workers=2` an int)."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {text!r} is not of the form key=value")
    return key.strip(), yaml.safe_load(raw)


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
