"""Dataclass trees of numpy arrays to (JSON, bytes) and back, bit-exact.

What crosses a topic must come back as the same object: a `SceneState` rebuilt from a message must make a
scripted policy decide exactly as the original does. So arrays travel as their raw bytes with dtype and
shape (float64 stays float64), dataclasses as their init fields (rebuilt through their constructor, so
derived fields are recomputed the same way), and the structure as JSON (str, int, float, bool, None;
tuples and lists and dicts keep their kind and order; Python floats round-trip exactly through JSON).

Only dataclasses of modules under `sgvla.` are rebuilt; `resolve` can turn others into plain namespaces
(e.g. to read a SceneState without importing the simulator).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

ALLOWED_PREFIX = "sgvla."


def _qualname(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def encode(obj: Any) -> tuple[str, bytes]:
    """(meta JSON, data bytes) of a tree of dataclasses, dicts, lists, tuples, arrays and scalars."""
    chunks: list[bytes] = []
    offset = 0

    def walk(x: Any) -> Any:
        nonlocal offset
        if isinstance(x, np.generic):
            x = np.asarray(x)
        if isinstance(x, np.ndarray):
            arr = np.ascontiguousarray(x)
            if arr.dtype.hasobject:
                raise TypeError("object arrays cannot be encoded")
            raw = arr.tobytes()
            node = {"nd": [offset, len(raw)], "dtype": arr.dtype.str, "shape": list(arr.shape)}
            chunks.append(raw)
            offset += len(raw)
            return node
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            fields = {f.name: walk(getattr(x, f.name)) for f in dataclasses.fields(x) if f.init}
            return {"dc": _qualname(type(x)), "fields": fields}
        if isinstance(x, SimpleNamespace):
            return {"ns": {k: walk(v) for k, v in vars(x).items()}}
        if isinstance(x, tuple):
            return {"tuple": [walk(v) for v in x]}
        if isinstance(x, list):
            return {"list": [walk(v) for v in x]}
        if isinstance(x, dict):
            return {"dict": [[walk(k), walk(v)] for k, v in x.items()]}
        if x is None or isinstance(x, (bool, int, float, str)):
            return {"v": x}
        raise TypeError(f"cannot encode {type(x).__name__}")

    meta = json.dumps(walk(obj), separators=(",", ":"), allow_nan=True)
    return meta, b"".join(chunks)


def _class(name: str) -> type:
    module, _, qual = name.partition(":")
    if not module.startswith(ALLOWED_PREFIX):
        raise ValueError(f"refusing to rebuild {name}: only dataclasses of {ALLOWED_PREFIX}* are decoded")
    obj: Any = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    if not dataclasses.is_dataclass(obj):
        raise ValueError(f"{name} is not a dataclass")
    return obj


def decode(meta: str, data: bytes | memoryview, resolve: bool | Callable[[str], bool] = True) -> Any:
    """The tree `encode` wrote. Dataclasses for which `resolve(qualified name)` is false come back as
    `SimpleNamespace`s of their fields. Arrays are fresh (aligned, writable) copies, as the originals were."""
    buffer = memoryview(data)
    decide = resolve if callable(resolve) else (lambda _name: bool(resolve))

    def walk(node: dict) -> Any:
        if "nd" in node:
            start, size = node["nd"]
            arr = np.frombuffer(buffer[start:start + size], dtype=np.dtype(node["dtype"]))
            return arr.reshape(node["shape"]).copy()
        if "dc" in node:
            fields = {k: walk(v) for k, v in node["fields"].items()}
            return _class(node["dc"])(**fields) if decide(node["dc"]) else SimpleNamespace(**fields)
        if "ns" in node:
            return SimpleNamespace(**{k: walk(v) for k, v in node["ns"].items()})
        if "tuple" in node:
            return tuple(walk(v) for v in node["tuple"])
        if "list" in node:
            return [walk(v) for v in node["list"]]
        if "dict" in node:
            return {walk(k): walk(v) for k, v in node["dict"]}
        return node["v"]

    return walk(json.loads(meta))


def light_modules(name: str) -> bool:
    """A `resolve` that rebuilds only the scene-graph core's classes (Camera, GeomBatch): decoding a
    SceneState with it imports no simulator."""
    return name.startswith("sgvla.scene_graph.")
