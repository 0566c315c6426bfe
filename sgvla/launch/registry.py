"""What a launch is: its typed arguments, the nodes it plans (`Plan`), and the registry of launches.

Each launch is one module (`sgvla.launch.sim_eval`, `hardware`, `so101_eval`) whose build function is registered
with its name, arguments and topic table (`register_launch`); `sgvla.launch.plan.launch_plan(name, args)` looks it
up. Arguments arrive as text (as `ros2 launch` hands them over) and are parsed by their declared type, once
(`Argument.parse`, `sgvla.core.settings.parse_value`): a build function gets booleans, integers and numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sgvla.core.registry import UnknownChoice
from sgvla.core.settings import Spec, parse_value, to_text
from sgvla.launch.nodes import EXECUTABLES, PACKAGE
from sgvla.launch.topics import Topic


@dataclass(frozen=True)
class Argument:
    name: str
    default: str  # text, as `ros2 launch` declares it
    description: str
    kind: type = str  # what the text means: bool, int, float or str (str with `choices`: one of them)
    minimum: float | None = None
    choices: tuple[str, ...] = ()

    def parse(self, value: Any) -> Any:
        try:
            return parse_value(value, self.kind, self.minimum, self.choices)
        except ValueError as e:
            raise ValueError(f"argument {self.name}: {e}") from None

    @classmethod
    def of(cls, spec: Spec, name: str = "", description: str = "") -> Argument:
        """The launch argument of a setting (`sgvla.core.settings`): its type, default, minimum and help."""
        return cls(name or spec.name, spec.text, description or spec.help, spec.kind, spec.minimum, spec.choices)


@dataclass(frozen=True)
class NodeSpec:
    name: str  # node name (also its key in the parameter file)
    executable: str
    parameters: dict[str, Any] = field(default_factory=dict)  # on top of the parameter file
    remappings: tuple[tuple[str, str], ...] = ()

    @property
    def module(self) -> str:
        return f"{PACKAGE}.{EXECUTABLES[self.executable]}"


@dataclass(frozen=True)
class Plan:
    name: str
    arguments: dict[str, str]  # resolved launch arguments (text)
    params_file: Path
    nodes: tuple[NodeSpec, ...]
    env: dict[str, str]  # environment defaults for every node (set only where unset)
    main: str  # the node whose exit ends the launch; its exit code is the launch's

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"launch {self.name!r} has no node {name!r}; it has {[n.name for n in self.nodes]}")


Build = Callable[[dict[str, Any]], Plan]


@dataclass(frozen=True)
class Launch:
    name: str
    arguments: tuple[Argument, ...]
    build: Build  # typed arguments -> the plan (its name and arguments are set by `launch_plan`)
    topics: tuple[Topic, ...]  # its node graph's interface table (`sgvla launch NAME --table`)
    roles: Mapping[str, str]  # node -> what it does, for the table
    cameras: Callable[[], tuple[str, ...]]  # the names `{camera}` stands for by default
    camera_note: str  # the table's note on `{camera}`; {cameras} is replaced by them
    every_qos: bool = False  # the table lists every QoS profile, not only those its topics use

    def resolve(self, args: Mapping[str, Any] | None = None) -> dict[str, str]:
        """Its arguments as text: the defaults with `args` on top; an unknown name is an error listing the known."""
        declared = {a.name: a.default for a in self.arguments}
        unknown = sorted(set(args or {}) - set(declared))
        if unknown:
            raise ValueError(f"launch {self.name}: unknown argument(s) {', '.join(unknown)}; "
                             f"it takes {', '.join(declared)}")
        return {**declared, **{k: to_text(v) for k, v in (args or {}).items()}}

    def parse(self, text: Mapping[str, str]) -> dict[str, Any]:
        """Resolved arguments typed: each parsed by its declaration (errors name the argument)."""
        return {a.name: a.parse(text[a.name]) for a in self.arguments}

    def plan(self, args: Mapping[str, Any] | None = None) -> Plan:
        """The nodes of this launch with `args` (text, as `ros2 launch` gives them) resolved and parsed."""
        text = self.resolve(args)
        return replace(self.build(self.parse(text)), name=self.name, arguments=text)


LAUNCHES: dict[str, Launch] = {}
ARGUMENTS: dict[str, tuple[Argument, ...]] = {}  # name -> its arguments (what launch files declare)


def register_launch(name: str, arguments: tuple[Argument, ...], *, topics: tuple[Topic, ...],
                    roles: Mapping[str, str], cameras: Callable[[], tuple[str, ...]], camera_note: str,
                    every_qos: bool = False) -> Callable[[Build], Build]:
    """Register the decorated build function as launch `name` with its arguments (each default must parse)."""
    def decorate(build: Build) -> Build:
        if name in LAUNCHES and LAUNCHES[name].build is not build:
            raise ValueError(f"launch {name!r} is already registered ({LAUNCHES[name].build.__module__})")
        names = [a.name for a in arguments]
        if len(set(names)) != len(names):
            raise ValueError(f"launch {name}: an argument is declared twice in {names}")
        for a in arguments:
            a.parse(a.default)
        LAUNCHES[name] = Launch(name, tuple(arguments), build, tuple(topics), roles, cameras, camera_note, every_qos)
        ARGUMENTS[name] = tuple(arguments)
        return build
    return decorate


def registered(name: str) -> Launch:
    """The launch registered as `name`; an error listing the known ones otherwise."""
    try:
        return LAUNCHES[name]
    except (KeyError, TypeError):
        raise UnknownChoice(f"unknown launch {name!r}; choose from {sorted(LAUNCHES)}") from None
