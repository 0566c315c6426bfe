"""The contract of `sgvla bag2dataset`: which topics of a rosbag2 recording become which LeRobot features, at which
rate, split into which episodes. A YAML file (`config/contracts/<name>.yaml`) read into typed dataclasses.

A contract is checked twice before any frame is written: when it loads (unknown keys, a feature without a topic, a
field path the message type does not have, joint names on a message without names; each error names the file and
the key) and when the bag opens (a topic missing from the bag, or recorded with another type than the contract's).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sgvla.core.config import ConfigError, from_mapping, load_yaml, apply_overrides
from sgvla.paths import resolve_data_path

CONTRACTS = Path("config/contracts")
IMAGE = "sensor_msgs/msg/Image"
IMAGE_ENCODINGS = ("rgb8", "bgr8", "mono8")
# Feature keys LeRobot itself writes; a contract must not produce them.
RESERVED = ("timestamp", "frame_index", "episode_index", "index", "task_index", "task")
UNITS = ("raw", "so101_lerobot")  # so101_lerobot: radians of SO101 joints -> LeRobot degrees, gripper 0..100 %


@dataclass
class FeatureSource:
    """One feature: the newest message on `topic` (of ROS 2 type `type`) at each tick, read at `field`.

    `field` is a dotted path into the message (`position`, `pose.position.x`), or a list of them, concatenated;
    each must end at a number or a sequence of numbers. `names` picks and orders the entries of a message that
    carries a `name` list (sensor_msgs/JointState): a message lacking one of the names is an error; on a message
    without one, `names` labels the entries in order (their count must match). Images
    (`sensor_msgs/msg/Image`, rgb8 / bgr8 / mono8) take no field: the feature is the picture, height x width x 3,
    stored as a video (`dtype: video`) or as image files (`dtype: image`)."""

    topic: str
    type: str
    field: str | list[str] = ""
    names: list[str] = dataclasses.field(default_factory=list)
    units: str = "raw"
    dtype: Literal["", "float32", "float64", "video", "image"] = ""  # "": float32, or video for an image
    max_age_ticks: float | None = None  # this feature's staleness limit; None: the contract's

    @property
    def fields(self) -> list[str]:
        return [self.field] if isinstance(self.field, str) else list(self.field)

    @property
    def is_image(self) -> bool:
        return self.type == IMAGE


@dataclass
class TaskSource:
    """The frames' task text: a constant (`text`), or the newest message on `topic` at the tick (`field`, default
    `data` of std_msgs/String), with `text` as the value until the topic's first message when both are given."""

    text: str = ""
    topic: str = ""
    type: str = "std_msgs/msg/String"
    field: str = "data"


@dataclass
class Episodes:
    """Where episodes begin and end.

    - `bag`: the whole bag (after trimming) is one episode.
    - `gap`: a gap longer than `gap_s` between consecutive messages of the feature topics starts a new episode.
    - `topic`: messages on `topic` (text at `field`, std_msgs/String's `data` by default) open and close them: a
      text starting with one of `start` opens one (closing an open one), with one of `stop` closes it, with one of
      `toggle` does either, with one of `discard` drops the open one. Messages outside an open episode are unused.
      With `on_change: true` instead, each new value at `field` (an episode number) starts an episode, which runs
      until the next new value or the bag's end.
    """

    by: Literal["bag", "gap", "topic"] = "bag"
    gap_s: float = 1.0
    topic: str = ""
    type: str = "std_msgs/msg/String"
    field: str = "data"
    start: list[str] = dataclasses.field(default_factory=list)
    stop: list[str] = dataclasses.field(default_factory=list)
    toggle: list[str] = dataclasses.field(default_factory=list)
    discard: list[str] = dataclasses.field(default_factory=list)
    on_change: bool = False
    min_frames: int = 1  # shorter episodes are left out (and counted)


@dataclass
class Trim:
    start_s: float = 0.0  # seconds cut from each episode's start
    end_s: float = 0.0  # and from its end


@dataclass
class Contract:
    """fps and robot type of the dataset, its features, its task, the episodes and the alignment rules.

    `stamps`: `header` reads each message's time from its header stamp (when it was measured), falling back to the
    bag's receive time for messages without a header or with a zero stamp; `receive` uses the receive time (when
    the recorder got it) for every message. `max_age_ticks`: at a tick, a feature whose newest message is older than
    this many ticks is late. `late`: `drop` leaves such frames out, `keep` writes them with the late value; either
    way they are counted in the report. `tick_tolerance_ns`: a message stamped at most this much after a tick counts
    as at the tick: for stamps their writer rounded (a simulator's steps x period, to whole nanoseconds, land a
    nanosecond either side of the ticks); 0 (the default) is the strict rule."""

    fps: int
    features: dict[str, FeatureSource]
    robot_type: str = ""
    task: TaskSource = dataclasses.field(default_factory=TaskSource)
    episodes: Episodes = dataclasses.field(default_factory=Episodes)
    trim: Trim = dataclasses.field(default_factory=Trim)
    stamps: Literal["header", "receive"] = "header"
    max_age_ticks: float = 2.0
    late: Literal["drop", "keep"] = "drop"
    tick_tolerance_ns: int = 0
    description: str = ""
    source: str = ""  # the file it came from (set when loaded)

    def max_age_s(self, name: str) -> float:
        own = self.features[name].max_age_ticks
        return (self.max_age_ticks if own is None else own) / self.fps

    def topics(self) -> dict[str, str]:
        """Every topic the contract reads -> its type."""
        out = {f.topic: f.type for f in self.features.values()}
        if self.task.topic:
            out[self.task.topic] = self.task.type
        if self.episodes.by == "topic":
            out[self.episodes.topic] = self.episodes.type
        return out


def contract_path(name_or_path: str | Path) -> Path:
    """A contract name (`hardware`: config/contracts/hardware.yaml) or a YAML file's path."""
    text = str(name_or_path)
    if Path(text).suffix in (".yaml", ".yml"):
        return Path(text).expanduser()
    path = resolve_data_path(CONTRACTS / f"{text}.yaml")
    if not path.is_file():
        shipped = sorted(p.stem for p in resolve_data_path(CONTRACTS).glob("*.yaml"))
        raise ConfigError(f"no contract named {text!r} ({path} does not exist); shipped contracts: {shipped}, or "
                          "give a YAML file's path")
    return path


def load_contract(name_or_path: str | Path, overrides: dict[str, Any] | None = None) -> Contract:
    """The contract, checked; `overrides` (`key=value` items of the command line, dotted keys reaching nested ones)
    change it first, and an error only they bring in names them rather than the file."""
    path = contract_path(name_or_path)
    where = str(path)
    raw = load_yaml(path)
    try:
        return _build(apply_overrides(raw, overrides), where)
    except ConfigError as e:
        if overrides:
            try:
                _build(raw, where)
            except ConfigError:
                raise e from None
            items = " ".join(f"{k}={v}" for k, v in overrides.items())
            raise ConfigError(f"command line {items}: {e}") from None
        raise


def _build(data: dict, where: str) -> Contract:
    contract = from_mapping(Contract, data, where)
    contract.source = where
    check_contract(contract, where)
    return contract


def check_contract(c: Contract, where: str) -> None:
    """What the loader's types cannot say: rates, sources, field paths against the message definitions."""
    from sgvla.nodegraph.bag import typestore

    store = typestore()
    if c.fps <= 0:
        raise ConfigError(f"{where}: fps: must be positive, got {c.fps}")
    if not 0 <= c.tick_tolerance_ns < 1_000_000_000 // c.fps:
        raise ConfigError(f"{where}: tick_tolerance_ns: must be at least 0 and below a tick, got {c.tick_tolerance_ns}")
    if c.max_age_ticks <= 0:
        raise ConfigError(f"{where}: max_age_ticks: must be positive, got {c.max_age_ticks}")
    if not c.features:
        raise ConfigError(f"{where}: features: none given; each needs a topic and a type")
    for name, f in c.features.items():
        key = f"{where}: features.{name}"
        if name in RESERVED:
            raise ConfigError(f"{key}: {name!r} is written by LeRobot itself (the task is the contract's `task`)")
        if not f.topic.startswith("/"):
            raise ConfigError(f"{key}.topic: {f.topic!r} is not an absolute topic name (a bag's topics are, e.g. "
                              "/joint_states)")
        _check_type(store, f.type, f"{key}.type")
        if f.units not in UNITS:
            raise ConfigError(f"{key}.units: {f.units!r} is not one of {list(UNITS)}")
        if f.max_age_ticks is not None and f.max_age_ticks <= 0:
            raise ConfigError(f"{key}.max_age_ticks: must be positive, got {f.max_age_ticks}")
        if f.is_image:
            if f.field or f.names or f.units != "raw":
                raise ConfigError(f"{key}: an image feature takes no field, names or units (the feature is the "
                                  "picture)")
            if f.dtype not in ("", "video", "image"):
                raise ConfigError(f"{key}.dtype: an image is stored as video or image, not {f.dtype}")
            if not name.startswith("observation.images."):
                raise ConfigError(f"{key}: image features are named observation.images.<camera> (LeRobot's "
                                  "convention: policies find their cameras by it)")
            continue
        if f.dtype in ("video", "image"):
            raise ConfigError(f"{key}.dtype: {f.dtype} is for sensor_msgs/msg/Image features")
        if not f.fields or not all(f.fields):
            raise ConfigError(f"{key}.field: which field of {f.type} to read (e.g. position)")
        for path in f.fields:
            _check_field(store, f.type, path, f"{key}.field")
        if f.names and len(set(f.names)) != len(f.names):
            raise ConfigError(f"{key}.names: repeated names in {f.names}")
        if f.units == "so101_lerobot" and not f.names:
            raise ConfigError(f"{key}.units: so101_lerobot converts named SO101 joints; give `names`")
    t = c.task
    if not (t.text or t.topic):
        raise ConfigError(f"{where}: task: give `text` (a constant) or `topic` (the newest text on it)")
    if t.topic:
        _check_type(store, t.type, f"{where}: task.type")
        _check_field(store, t.type, t.field, f"{where}: task.field")
    e = c.episodes
    if e.by == "gap" and e.gap_s <= 0:
        raise ConfigError(f"{where}: episodes.gap_s: must be positive, got {e.gap_s}")
    if e.by == "topic":
        if not e.topic:
            raise ConfigError(f"{where}: episodes.topic: episodes by topic need the topic")
        if not (e.start or e.toggle or e.on_change):
            raise ConfigError(f"{where}: episodes: by topic needs `start` or `toggle` texts, or `on_change: true`")
        _check_type(store, e.type, f"{where}: episodes.type")
        _check_field(store, e.type, e.field, f"{where}: episodes.field")
    if c.trim.start_s < 0 or c.trim.end_s < 0:
        raise ConfigError(f"{where}: trim: seconds must not be negative")


def _check_type(store, msgtype: str, key: str) -> None:
    if msgtype not in store.fielddefs:
        raise ConfigError(f"{key}: unknown message type {msgtype!r} (pkg/msg/Name, e.g. sensor_msgs/msg/JointState)")


def _field_names(store, msgtype: str) -> list[str]:
    return [name for name, _ in store.fielddefs[msgtype][1]]


def _check_field(store, msgtype: str, path: str, key: str) -> None:
    """Every step of a dotted path is a field of the message it reaches."""
    current = msgtype
    for i, part in enumerate(path.split(".")):
        fields = dict(store.fielddefs[current][1])
        if part not in fields:
            raise ConfigError(f"{key}: {current} has no field {part!r} (in {path!r}); its fields: "
                              f"{list(fields)}")
        kind, desc = fields[part]
        if kind.name == "NAME":
            current = desc
        elif i < len(path.split(".")) - 1:
            raise ConfigError(f"{key}: {path!r} goes past {part!r}, which is no message")
