"""A rosbag2 recording (MCAP or sqlite3, read with the `rosbags` package: no ROS install needed) into a LeRobot
dataset, by a contract (`sgvla.nodegraph.bag_contract`): which topics are which features, at which fps, which
episodes.

The alignment rule: an episode's frames are ticks at the contract's fps from the episode's start, and each frame
takes, for each feature, the newest message whose time is at or before the tick, never a later one (no frame sees
the future). A message's time is its header stamp (`stamps: header`, when it was measured; the bag's receive time
for messages without a header or with a zero stamp) or the bag's receive time (`stamps: receive`). At a tick, a
feature with no message yet is missing, one whose newest message is older than its staleness limit is late:
ticks before every feature has a message are skipped, late ones dropped (`late: drop`) or kept (`late: keep`), and
all of it is counted per feature in the report (messages seen, ticks filled, late, missing, the oldest value used)
and per episode; nothing is filled silently.

A bag cut short (a killed recorder, a power loss: `sgvla.nodegraph.bag.open_bag` streams every complete message)
ends, for the conversion, where its earliest-ending feature ends: past that, a feature's messages were lost, and its
frames would differ from the whole recording's. So the frames of a cut bag are those the whole one would have had up
to there; the report says where the bag ends, what was lost and which episode the end cut short.

The contract's topics are read into memory (their extracted values: the images too) before the dataset is
written: a bag of long camera streams needs memory of that size.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sgvla.core.config import ConfigError
from sgvla.core.sched import no_realtime
from sgvla.nodegraph.bag import Bag, BagError, open_bag
from sgvla.nodegraph.bag_contract import Contract, FeatureSource

NS = 1_000_000_000
REPORT = "bag2dataset_report.json"  # in the dataset's folder
TASK = "task"
EPISODES = "episodes"  # the series of the episode topic


# -- the alignment rule ---------------------------------------------------------------------------------------------

@dataclass
class FeatureStats:
    messages: int = 0  # in the bag (all episodes)
    filled: int = 0  # ticks written with a fresh message
    late: int = 0  # ticks whose newest message was older than the limit (dropped or kept, as the contract says)
    missing: int = 0  # ticks with no message yet
    max_age_s: float = 0.0  # the oldest value written into a frame
    limit_s: float = 0.0  # older than this at a tick is late


@dataclass
class Tick:
    time_ns: int
    picks: dict[str, int]  # feature -> index of its newest message at or before the tick
    late: list[str]  # features whose pick is older than their limit


def ticks(start_ns: int, end_ns: int, fps: int) -> list[int]:
    """start, start + 1/fps, ... up to end (inclusive), in integer nanoseconds (no drift over long episodes)."""
    # the last k with k * NS // fps <= end - start: k * NS < (end - start + 1) * fps
    count = ((end_ns - start_ns + 1) * fps - 1) // NS + 1 if end_ns >= start_ns else 0
    return [start_ns + k * NS // fps for k in range(count)]


def align(times: dict[str, Sequence[int]], tick_times: Sequence[int], max_age_ns: dict[str, int],
          stats: dict[str, FeatureStats], late: str = "drop", tolerance_ns: int = 0) -> tuple[list[Tick], int, int]:
    """The frames of one episode: for each tick, each feature's newest message at or before it (`times[name]`:
    the feature's message times, sorted; `tolerance_ns` after it counts as at it). Returns (frames, ticks skipped
    before every feature had a message, ticks dropped as late); counts into `stats`."""
    frames: list[Tick] = []
    waiting = dropped = 0
    for t in tick_times:
        picks, late_names, missing = {}, [], []
        for name, ts in times.items():
            i = bisect_right(ts, t + tolerance_ns) - 1  # the newest at or before t: t + 1 ns is the next tick's
            if i < 0:
                missing.append(name)
                continue
            picks[name] = i
            if t - ts[i] > max_age_ns[name]:
                late_names.append(name)
        for name in missing:
            stats[name].missing += 1
        if missing:
            waiting += 1  # only before the first message of some feature: later, a message stays the newest
            continue
        for name in late_names:
            stats[name].late += 1
        if late_names and late == "drop":
            dropped += 1
            continue
        for name, i in picks.items():
            if name not in late_names:
                stats[name].filled += 1
            stats[name].max_age_s = max(stats[name].max_age_s, max(t - times[name][i], 0) / NS)
        frames.append(Tick(t, picks, late_names))
    return frames, waiting, dropped


# -- reading the bag -------------------------------------------------------------------------------------------------

@dataclass
class Series:
    """One topic's messages in time order: their times and what the contract reads of them."""

    times: list[int] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)
    receive_times: int = 0  # messages timed by receive time under `stamps: header` (no header, or a zero stamp)


def message_time(msg, receive_ns: int, stamps: str) -> tuple[int, bool]:
    header = getattr(msg, "header", None)
    if stamps == "header" and header is not None:
        t = int(header.stamp.sec) * NS + int(header.stamp.nanosec)
        if t > 0:
            return t, False
    return receive_ns, stamps == "header"


def read_field(msg, path: str):
    value = msg
    for part in path.split("."):
        value = getattr(value, part)
    return value


def numbers(msg, f: FeatureSource, topic_key: str) -> np.ndarray:
    """The feature's vector from one message: its fields concatenated, joints picked by name."""
    by_name = bool(f.names) and hasattr(msg, "name")  # else the names label the entries in order
    if by_name:
        names = list(msg.name)
        absent = [n for n in f.names if n not in names]
        if absent:
            raise BagError(f"{topic_key}: a message on {f.topic} lacks joint(s) {absent} (it names {names})")
    parts = []
    for path in f.fields:
        value = np.asarray(read_field(msg, path), dtype=np.float64).ravel()
        if by_name:
            if len(value) != len(msg.name):
                raise BagError(f"{topic_key}: a message on {f.topic} has {len(msg.name)} names and {len(value)} "
                               f"{path} values")
            value = value[[list(msg.name).index(n) for n in f.names]]
        parts.append(value)
    out = np.concatenate(parts) if parts else np.zeros(0)
    if f.names and not by_name and len(out) != len(f.names):
        raise BagError(f"{topic_key}.names: a message on {f.topic} has {len(out)} values for {len(f.names)} names")
    if f.units == "so101_lerobot":
        from sgvla.so101.hardware.joints import from_radians

        converted = from_radians(f.names, out[:len(f.names)].tolist())
        out = np.concatenate([[converted[n] for n in f.names], out[len(f.names):]])
    return out


def picture(msg, topic_key: str) -> np.ndarray:
    """height x width x 3 uint8 RGB from a sensor_msgs/Image (rgb8, bgr8, mono8; rows may be padded)."""
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    channels = {"rgb8": 3, "bgr8": 3, "mono8": 1}.get(msg.encoding)
    if channels is None:
        raise BagError(f"{topic_key}: image encoding {msg.encoding!r} on a frame; rgb8, bgr8 and mono8 are read")
    data = np.frombuffer(bytes(msg.data) if not isinstance(msg.data, np.ndarray) else msg.data, dtype=np.uint8)
    if data.size < h * step or step < w * channels:
        raise BagError(f"{topic_key}: an image of {data.size} bytes cannot be {h}x{w} {msg.encoding} (step {step})")
    pixels = data[:h * step].reshape(h, step)[:, :w * channels].reshape(h, w, channels)
    if msg.encoding == "bgr8":
        pixels = pixels[..., ::-1]
    elif channels == 1:
        pixels = np.repeat(pixels, 3, axis=2)
    return np.ascontiguousarray(pixels)


def check_bag(contract: Contract, found: dict[str, str], bag: Path) -> None:
    """Every topic the contract reads is in the bag with the contract's type (a task topic may be absent when the
    contract also gives a constant text)."""
    where = contract.source or "contract"
    wanted = [(f"features.{n}", f.topic, f.type) for n, f in contract.features.items()]
    if contract.task.topic and not (contract.task.text and contract.task.topic not in found):
        wanted.append(("task", contract.task.topic, contract.task.type))
    if contract.episodes.by == "topic":
        wanted.append(("episodes", contract.episodes.topic, contract.episodes.type))
    for key, topic, msgtype in wanted:
        if topic not in found:
            raise BagError(f"{where}: {key}.topic: {topic} is not in {bag}; its topics: "
                           f"{', '.join(f'{t} ({m})' for t, m in sorted(found.items()))}")
        if found[topic] != msgtype:
            raise BagError(f"{where}: {key}.type: {topic} is {found[topic]} in {bag}, the contract says {msgtype}")


def read_series(contract: Contract, bag: Bag, progress: Callable[[str], None] | None = None) -> dict[str, Series]:
    """topic -> its messages (time, extracted value), for every topic the contract reads."""
    from sgvla.nodegraph.bag import typestore

    store = typestore()
    by_topic: dict[str, list[tuple[str, FeatureSource | None]]] = {}
    for name, f in contract.features.items():
        by_topic.setdefault(f.topic, []).append((name, f))
    extra = {contract.task.topic: contract.task.field} if contract.task.topic else {}
    if contract.episodes.by == "topic":
        extra[contract.episodes.topic] = contract.episodes.field
    series: dict[str, Series] = {}  # feature name, "task" or "episodes" -> series
    where = contract.source or "contract"
    for n, (topic, msgtype, receive_ns, raw) in enumerate(bag.messages(set(by_topic) | set(extra))):
        msg = store.deserialize_cdr(raw, msgtype)
        t, by_receive = message_time(msg, receive_ns, contract.stamps)
        for name, f in by_topic.get(topic, ()):
            key = f"{where}: features.{name}"
            value = picture(msg, key) if f.is_image else numbers(msg, f, key)
            s = series.setdefault(name, Series())
            s.times.append(t)
            s.values.append(value)
            s.receive_times += by_receive
        for name, source, path in ((TASK, contract.task.topic, contract.task.field),
                                   (EPISODES, contract.episodes.topic if contract.episodes.by == "topic" else "",
                                   contract.episodes.field)):
            if topic == source:
                s = series.setdefault(name, Series())
                s.times.append(t)
                s.values.append(str(read_field(msg, path)).strip())
                s.receive_times += by_receive
        if progress and n and n % 2000 == 0:
            progress(f"read {n} messages")
    for s in series.values():  # header stamps need not come in receive order
        order = sorted(range(len(s.times)), key=s.times.__getitem__)
        s.times = [s.times[i] for i in order]
        s.values = [s.values[i] for i in order]
    return series


def check_clocks(contract: Contract, series: dict[str, Series], bag: Path) -> None:
    """Header stamps of simulated time (a lock-step simulator's, from 0) cannot be compared with the receive times
    (wall clock) that messages without a header get: refused, naming the topics, rather than aligned wrongly."""
    if contract.stamps != "header":
        return
    stamped = {n: s for n, s in series.items() if s.receive_times < len(s.times)}
    if not stamped:
        return
    latest = max(s.times[-1] for s in stamped.values())
    for name, s in series.items():
        if s.times and name not in stamped and abs(s.times[0] - latest) > 24 * 3600 * NS:
            raise BagError(f"{contract.source}: {name}: its messages have no header stamp, so they are timed by the "
                           f"bag's receive time (wall clock), while the header stamps of {sorted(stamped)} are on "
                           f"another clock (simulated time?) in {bag}; use stamps=receive, or take it from a stamped "
                           "topic or a constant")


# -- episodes --------------------------------------------------------------------------------------------------------

def episode_windows(contract: Contract, series: dict[str, Series]) -> list[tuple[int, int]]:
    """(start, end) times of the episodes, before trimming."""
    times = sorted(t for name in contract.features for t in series.get(name, Series()).times)
    if not times:
        return []
    e = contract.episodes
    if e.by == "bag":
        return [(times[0], times[-1])]
    if e.by == "gap":
        windows, start = [], times[0]
        for before, after in zip(times, times[1:]):
            if after - before > e.gap_s * NS:
                windows.append((start, before))
                start = after
        return [*windows, (start, times[-1])]
    windows, opened = [], None
    control = series.get(EPISODES, Series())
    if e.on_change:
        starts = [t for i, (t, v) in enumerate(zip(control.times, control.values))
                  if i == 0 or v != control.values[i - 1]]
        return [(a, b) for a, b in zip(starts, [*starts[1:], times[-1]]) if b >= a]
    for t, text in zip(control.times, control.values):
        def says(values: list[str]) -> bool:
            return any(text.startswith(v) for v in values)

        if says(e.discard):
            opened = None
        elif says(e.stop) or (says(e.toggle) and opened is not None):
            if opened is not None:
                windows.append((opened, t))
            opened = None
        elif says(e.start) or says(e.toggle):
            if opened is not None:
                windows.append((opened, t))
            opened = t
    if opened is not None:
        windows.append((opened, times[-1]))
    return windows


# -- the conversion --------------------------------------------------------------------------------------------------

@dataclass
class EpisodeReport:
    start_s: float  # since the bag's first message of a feature
    end_s: float
    ticks: int
    frames: int
    skipped_waiting: int  # ticks before every feature had a message
    dropped_late: int  # ticks left out because a feature was late (late: drop)
    kept_late: int  # frames written with a late feature (late: keep)
    saved: bool
    episode_index: int | None = None
    why_not: str = ""
    start_ns: int = 0  # the first tick, in the bag's time (stamps as the contract says)
    cut: bool = False  # the bag, cut short, ends in this episode: its frames are those up to where the bag ends


@dataclass
class Report:
    bag: str
    contract: str
    dataset: str
    fps: int
    stamps: str
    late: str
    max_age_ticks: float
    features: dict[str, FeatureStats]
    episodes: list[EpisodeReport]
    receive_timed: dict[str, int]  # feature -> messages timed by receive time (no header or a zero stamp)
    ending: list[str] = field(default_factory=list)  # a bag read as a stream: where it ends, what was lost, a line each
    complete_until_ns: int | None = None  # a bag cut short: the last time every feature's messages reach

    @property
    def frames(self) -> int:
        return sum(e.frames for e in self.episodes if e.saved)

    def to_json(self) -> dict:
        out = asdict(self)
        out["frames"] = self.frames
        out["saved_episodes"] = sum(e.saved for e in self.episodes)
        return out

    def table(self) -> str:
        rows = [("feature", "messages", "filled", "late", "missing", "max age (ms)", "late after (ms)")]
        rows += [(n, str(s.messages), str(s.filled), str(s.late), str(s.missing), f"{s.max_age_s * 1000:.1f}",
                  f"{s.limit_s * 1000:.1f}") for n, s in self.features.items()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                 for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        saved = [e for e in self.episodes if e.saved]
        lines.append("")
        lines.append(f"{len(saved)} episode(s) saved of {len(self.episodes)}, {self.frames} frames at {self.fps} fps "
                     f"(stamps: {self.stamps}; late frames {'dropped' if self.late == 'drop' else 'kept'})")
        for i, e in enumerate(self.episodes):
            state = f"episode {e.episode_index}" if e.saved else f"not saved: {e.why_not}"
            lines.append(f"  window {i}: {e.start_s:.3f}-{e.end_s:.3f} s, {e.ticks} ticks, {e.frames} frames, "
                         f"{e.skipped_waiting} skipped before all features arrived, {e.dropped_late} dropped late, "
                         f"{e.kept_late} kept late -> {state}" + (" (cut short: the bag ends in it)" if e.cut else ""))
        if self.ending:
            lines.append("the bag was cut short; converted up to where every feature's messages reach:"
                         if self.complete_until_ns is not None else "the bag was read as a stream, complete:")
            lines += [f"  {line}" for line in self.ending]
        return "\n".join(lines)


def lerobot_features(contract: Contract, series: dict[str, Series]) -> dict[str, dict]:
    """LeRobot's feature dict, shapes from the first message of each feature."""
    from sgvla.so101.hardware.joints import action_key

    out = {}
    for name, f in contract.features.items():
        first = series[name].values[0]
        if f.is_image:
            out[name] = {"dtype": f.dtype or "video", "shape": tuple(first.shape),
                         "names": ["height", "width", "channels"]}
        else:
            names = [action_key(n) if f.units == "so101_lerobot" else n for n in f.names]
            out[name] = {"dtype": f.dtype or "float32", "shape": (len(first),),
                         "names": names if len(names) == len(first) else None}
    return out


def convert(bag: str | Path, contract: Contract, out: str | Path, repo_id: str = "local/bag2dataset",
            progress: Callable[[str], None] | None = None) -> Report:
    """Write the LeRobot dataset of `bag` into the new folder `out`; returns the report (also saved there)."""
    bag, out = Path(bag).expanduser(), Path(out).expanduser()
    say = progress or (lambda _text: None)
    if out.exists():
        raise FileExistsError(f"{out} exists; bag2dataset writes a new dataset folder")
    if not bag.exists():
        raise FileNotFoundError(f"{bag}: no such bag (a rosbag2 folder with metadata.yaml, or its .mcap/.db3 file)")
    source = open_bag(bag)
    bag = source.path
    if source.cut and not source.complete_messages:
        raise BagError(f"{bag}: nothing complete to convert: {'; '.join(source.ending())}")
    check_bag(contract, source.topics, bag)
    series = read_series(contract, source, say)
    empty = [n for n in contract.features if not series.get(n, Series()).times]
    if empty:
        raise BagError(f"{contract.source}: features {empty}: their topics have no messages in {bag}"
                       + (f" (cut short: {'; '.join(source.ending())})" if source.cut else ""))
    for name, f in contract.features.items():  # shapes stay fixed within a dataset
        shapes = {np.shape(v) for v in series[name].values}
        if len(shapes) > 1:
            raise BagError(f"{contract.source}: features.{name}: messages on {f.topic} have different shapes "
                           f"{sorted(shapes)}")
    check_clocks(contract, series, bag)
    stats = {n: FeatureStats(messages=len(series[n].times), limit_s=contract.max_age_s(n)) for n in contract.features}
    origin = min(series[n].times[0] for n in contract.features)
    windows = episode_windows(contract, series)
    complete_until = min(series[n].times[-1] for n in contract.features) if source.cut else None
    if complete_until is not None:
        after = sum(a > complete_until for a, _ in windows)
        windows = [(a, min(b, complete_until)) for a, b in windows if a <= complete_until]
        say(f"the bag was cut short: converted up to {(complete_until - origin) / NS:.3f} s, where every feature's "
            f"messages reach" + (f" ({after} later window(s) left out)" if after else ""))
    say(f"{len(windows)} episode window(s) in {bag}")
    features = lerobot_features(contract, series)

    from sgvla.so101.hardware.recording import quiet_encoders

    quiet_encoders()
    with no_realtime():  # SVT-AV1 would leave this thread, and every later child, at SCHED_FIFO 99 (sgvla.core.sched)
        return _write(bag, contract, out, repo_id, say, series, windows, features, stats, origin,
                      (source.ending(), complete_until))


def _write(bag: Path, contract: Contract, out: Path, repo_id: str, say: Callable[[str], None],
           series: dict[str, Series], windows: list[tuple[int, int]], features: dict, stats: dict[str, FeatureStats],
           origin: int, ending: tuple[list[str], int | None]) -> Report:
    """The dataset's episodes, frame by frame, then the report beside them."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    task_series = series.get(TASK, Series())
    feature_times = {n: series[n].times for n in contract.features}
    max_age = {n: math.floor(contract.max_age_s(n) * NS) for n in contract.features}
    dataset = LeRobotDataset.create(repo_id, contract.fps, features, root=out, robot_type=contract.robot_type or None,
                                    use_videos=any(f["dtype"] == "video" for f in features.values()))
    episodes: list[EpisodeReport] = []
    saved = 0
    try:
        for i, (start, end) in enumerate(windows):
            start, end = start + round(contract.trim.start_s * NS), end - round(contract.trim.end_s * NS)
            tick_times = ticks(start, end, contract.fps)
            # Ticks before the first task text wait for it as for a feature's first message, before alignment, so
            # the features' counts describe the frames written (they counted these ticks too, a late one included).
            untitled = 0
            if not contract.task.text:
                untitled = (bisect_left(tick_times, task_series.times[0] - contract.tick_tolerance_ns)
                            if task_series.times else len(tick_times))
            frames, waiting, dropped = align(feature_times, tick_times[untitled:], max_age, stats, contract.late,
                                             contract.tick_tolerance_ns)
            report = EpisodeReport((start - origin) / NS, (end - origin) / NS, len(tick_times), 0, untitled + waiting,
                                   dropped, sum(bool(f.late) for f in frames), False, start_ns=start,
                                   cut=ending[1] is not None and windows[i][1] == ending[1])
            episodes.append(report)
            written = 0
            for frame in frames:
                j = bisect_right(task_series.times, frame.time_ns + contract.tick_tolerance_ns) - 1
                task = task_series.values[j] if j >= 0 else contract.task.text
                if not task:
                    report.skipped_waiting += 1  # no task text yet
                    continue
                dataset.add_frame({**{n: series[n].values[k] if contract.features[n].is_image
                                      else series[n].values[k].astype(features[n]["dtype"])
                                      for n, k in frame.picks.items()}, "task": task})
                written += 1
            report.frames = written
            if written < max(contract.episodes.min_frames, 1):
                report.why_not = f"{written} frame(s), fewer than episodes.min_frames={contract.episodes.min_frames}"
                if written:
                    dataset.clear_episode_buffer()
                continue
            dataset.save_episode(parallel_encoding=False)
            report.saved, report.episode_index = True, saved
            saved += 1
            say(f"episode {saved - 1}: {written} frames (window {i + 1}/{len(windows)})")
    finally:
        dataset.finalize()
    result = Report(str(bag), contract.source, str(out), contract.fps, contract.stamps, contract.late,
                    contract.max_age_ticks, stats, episodes,
                    {n: series[n].receive_times for n in contract.features}, *ending)
    (out / REPORT).write_text(json.dumps(result.to_json(), indent=2) + "\n")
    if not saved and ending[1] is not None:
        raise BagError(f"no episode of {bag} had a frame with every feature before the bag's end (see {out / REPORT}): "
                       + "; ".join(ending[0]))
    if not saved:
        raise BagError(f"no episode of {bag} had a frame with every feature (see {out / REPORT}):\n{result.table()}")
    return result


__all__ = ["BagError", "ConfigError", "Report", "align", "convert", "ticks"]
