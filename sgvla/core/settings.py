"""Settings declared once: a dataclass whose fields carry their help text and bounds (`setting`), from which every
surface that takes them is made: a command's flags, a launch's arguments, a node's declared parameters (with
their ranges), and the defaults a parameter file repeats.

    @dataclass(frozen=True)
    class RecordingSettings:
        episodes: int = setting(1, "episodes to save", minimum=1)
        auto_start: bool = setting(False, "start episodes without a key press", flag="--auto")

`specs(cls)` lists each field as a `Spec` (name, type, default, minimum, choices, help); `parse_value` is the one
parser of a setting given as text (a launch argument, a command-line value): booleans, integers and numbers with
their minimum, names from a fixed set, with the same messages wherever a value is refused.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

SETTING = "sgvla.setting"  # the metadata key of a field made by `setting`
KINDS = (bool, int, float, str)
TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "")


def setting(default: Any, help: str, *, minimum: float | None = None, choices: tuple[str, ...] = (),
            flag: str = "", required: bool = False) -> Any:
    """A dataclass field with what every surface needs: its help text, its minimum (numbers), its choices (names),
    its command-line flag where that is not ``--name-with-dashes``, and whether a command requires it."""
    return dataclasses.field(default=default, metadata={SETTING: {"help": help, "minimum": minimum,
                                                                  "choices": tuple(choices), "flag": flag,
                                                                  "required": required}})


@dataclass(frozen=True)
class Spec:
    name: str
    kind: type  # bool, int, float or str
    default: Any
    help: str
    minimum: float | None = None
    choices: tuple[str, ...] = ()
    flag: str = ""
    required: bool = False

    @property
    def text(self) -> str:
        """The default as a launch argument's text."""
        return to_text(self.default)

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def parse(self, value: Any) -> Any:
        """`value` (text, or already typed) as this setting's type; ValueError saying why not, without the name."""
        return parse_value(value, self.kind, self.minimum, self.choices)


def specs(cls: type) -> tuple[Spec, ...]:
    """The settings of dataclass `cls`, in field order (every field must be made by `setting`)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        meta = f.metadata.get(SETTING)
        if meta is None:
            raise TypeError(f"{cls.__name__}.{f.name} is not a setting (declare it with sgvla.core.settings.setting)")
        if hints[f.name] not in KINDS:
            raise TypeError(f"{cls.__name__}.{f.name}: a setting is one of {[k.__name__ for k in KINDS]}")
        out.append(Spec(f.name, hints[f.name], f.default, **meta))
    return tuple(out)


def to_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_value(value: Any, kind: type, minimum: float | None = None, choices: tuple[str, ...] = ()) -> Any:
    """The one parser of a setting given as text: true/false (also yes/no, on/off, 1/0; empty is false), integers,
    numbers (an integer is a number), text, a name of `choices`; a number below `minimum` is refused. ValueError
    with the reason (the caller names the setting)."""
    text = value if isinstance(value, str) else to_text(value)
    if kind is bool:
        if isinstance(value, bool):
            return value
        v = text.strip().lower()
        if v in TRUE or v in FALSE:
            return v in TRUE
        raise ValueError(f"expected true or false, got {value!r}")
    if kind in (int, float):
        if isinstance(value, bool) or (kind is int and isinstance(value, float)):
            raise ValueError(f"expected {'an integer' if kind is int else 'a number'}, got {value!r}")
        try:
            number = kind(text.strip())
        except ValueError:
            raise ValueError(f"expected {'an integer' if kind is int else 'a number'}, got {value!r}") from None
        if minimum is not None and number < minimum:
            raise ValueError(f"must be >= {minimum:g}, got {value!r}")
        return number
    if choices:
        v = text.strip().lower()
        if v not in choices:
            raise ValueError(f"expected {' or '.join(choices)}, got {value!r}")
        return v
    return text


def check(instance: Any) -> None:
    """Refuse a settings instance whose values are not of their type or below their minimum (ValueError naming the
    field): for instances made from typed values (a node's parameters, argparse's namespace)."""
    for spec in specs(type(instance)):
        value = getattr(instance, spec.name)
        if spec.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, spec.kind) or (spec.kind is int and isinstance(value, bool)):
            raise ValueError(f"{spec.name}: expected {spec.kind.__name__}, got {value!r}")
        try:
            spec.parse(value)
        except ValueError as e:
            raise ValueError(f"{spec.name}: {e}") from None
