"""Registered configuration choices, in the style of LeRobot's ``draccus.ChoiceRegistry``.

A *kind* of choice (a suite, a policy, a graph source, a context mode) is a dataclass base deriving from
:class:`Choice`; each choice is a subclass registered under a name, with its own typed options::

    @dataclass
    class GraphSourceConfig(Choice):          # the kind: a registry of its own
        ...

    @GraphSourceConfig.register("vlm")         # one choice, one module
    @dataclass
    class VLMSourceConfig(GraphSourceConfig):
        client: str = ""
        rate_hz: float = 1.0

In YAML a choice is its name (``graph_source: ground_truth``) or a mapping with ``type`` and options
(``graph_source: {type: vlm, client: qwen2_5_vl_7b}``); :mod:`sgvla.core.config` builds the registered class,
so an unknown name or option fails when the config loads, with the valid ones in the message. A kind may name its
choice with another key where its YAML always did (a rig camera's driver is its ``source``:
``class CameraConfig(Choice, kind="camera driver", key="source")``).
"""

import builtins
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

C = TypeVar("C", bound=builtins.type)


class UnknownChoice(ValueError):
    pass


class Choice:
    """Base of a kind of registered choice; every direct subclass gets a registry of its own."""

    _registry: ClassVar[dict[str, builtins.type]]  # builtins: `type` is the choice's name here
    _kind: ClassVar[str]
    _key: ClassVar[str] = "type"  # the YAML key that names the choice
    type: ClassVar[str] = ""  # the registered name of a concrete choice

    def __init_subclass__(cls, kind: str | None = None, key: str = "type", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if Choice in cls.__bases__:
            cls._registry = {}
            cls._kind = kind or cls.__name__
            cls._key = key

    @classmethod
    def register(cls, name: str) -> "Callable[[C], C]":
        def decorate(sub: C) -> C:
            if not issubclass(sub, cls):
                raise TypeError(f"{sub.__name__} does not derive from {cls.__name__}")
            if name in cls._registry and cls._registry[name] is not sub:
                raise ValueError(f"{cls._kind} {name!r} is already registered ({cls._registry[name].__name__})")
            cls._registry[name] = sub
            sub.type = name
            return sub
        return decorate

    @classmethod
    def unregister(cls, name: str) -> None:
        """For tests that register a choice of their own."""
        cls._registry.pop(name, None)

    @classmethod
    def choices(cls) -> dict[str, builtins.type]:
        return dict(cls._registry)

    @classmethod
    def choice(cls, name: str) -> builtins.type:
        """The class registered as `name`; an error listing the valid names otherwise."""
        try:
            return cls._registry[name]
        except (KeyError, TypeError):
            raise UnknownChoice(f"unknown {cls._kind} {name!r}; choose from {sorted(cls._registry)}") from None

    @classmethod
    def is_kind(cls, hint: Any) -> bool:
        """Whether `hint` is a kind of choice (a direct Choice subclass or one of its descendants)."""
        return isinstance(hint, builtins.type) and issubclass(hint, Choice) and hint is not Choice
