"""Teleoperated recording into a LeRobot v3 dataset, one whole episode at a time.

:class:`EpisodeStore` writes with LeRobot's own writer (``LeRobotDataset.create/resume``,
``add_frame``, ``save_episode``, ``clear_episode_buffer``) and adds what a long session on a real
arm needs: each episode is finalized into files of its own, and the few shared metadata files are
backed up before a save, so a crash at any moment leaves every finished episode readable and the
unfinished one gone (rolled back when the dataset is next opened).

:class:`TeleopRecorder` is the loop: leader -> safety -> follower at the control rate, cameras
sampled at each tick, and operator commands (start, save, re-record, abort, quit) from any
:class:`KeySource`: a terminal, a queue fed by ROS or by tests.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import queue
import select
import shutil
import sys
import termios
import time
import tty
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
from lerobot.configs.video import DepthEncoderConfig
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.utils.constants import DEFAULT_FEATURES
from lerobot.utils.feature_utils import hw_to_dataset_features

from sgvla.so101.hardware.arm import FollowerArm, LeaderArm
from sgvla.so101.hardware.cameras import Camera, Frame
from sgvla.so101.hardware.joints import JOINTS, action_key
from sgvla.core.sched import no_realtime

log = logging.getLogger(__name__)

SCENE_GRAPH = "scene_graph"  # optional per-frame string feature: the scene graph as JSON
COMMIT_DIR = ".sgvla_commit"
SHARED_FILES = ("meta/info.json", "meta/stats.json", "meta/tasks.parquet")  # rewritten by every save
EPISODE_DIRS = ("data", "videos", "meta/episodes")  # each episode adds files of its own here


class RecordingError(RuntimeError):
    pass


# -- the video encoders' banners ---------------------------------------------------------------------------------
# LeRobot encodes camera streams with SVT-AV1 and depth streams with x265 (lossless HEVC); both print their version,
# build, CPU features and every setting to stderr for each video they open (about 60 lines per saved episode), at
# their own "info" level and past libav's log level. Their errors still print; so do their warnings about a
# user's own settings being changed, not the tuning notes they print for small images.
SVT_LOG = "1"  # SVT-AV1's SVT_LOG: 1 = errors (0 fatal, 2 warnings, 3 info: its default); a user's own SVT_LOG wins
X265_LOG = "log-level=error"


@dataclass
class QuietDepthEncoder(DepthEncoderConfig):
    """LeRobot's depth encoder, settings and all (so the dataset's info.json records exactly LeRobot's defaults),
    with x265's log level at errors: added to the options handed to the codec, not to the persisted settings."""

    def get_codec_options(self, encoder_threads: int | None = None, as_strings: bool = False) -> dict:
        options = super().get_codec_options(encoder_threads, as_strings)
        if self.vcodec == "hevc":
            options["x265-params"] = ":".join(p for p in (options.get("x265-params"), X265_LOG) if p)
        return options


def quiet_encoders() -> None:
    """SVT-AV1 reads its log level from the environment when an encoder opens."""
    os.environ.setdefault("SVT_LOG", SVT_LOG)


def dataset_features(cameras: Mapping[str, tuple[int, int, bool]], scene_graphs: bool = False) -> dict:
    """LeRobot features for the SO101: state and action per joint, ``observation.images.<camera>`` videos,
    ``<camera>_depth`` for depth streams. ``cameras`` maps name -> (height, width, has_depth)."""
    joints = {action_key(j): float for j in JOINTS}
    images = {}
    for name, (height, width, depth) in cameras.items():
        images[name] = (height, width, 3)
        if depth:
            images[f"{name}_depth"] = (height, width, 1)
    features = {**hw_to_dataset_features(joints, "action"),
                **hw_to_dataset_features({**joints, **images}, "observation")}
    if scene_graphs:
        features[SCENE_GRAPH] = {"dtype": "string", "shape": (1,), "names": None}
    return features


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for d in EPISODE_DIRS if (root / d).is_dir()
                  for p in (root / d).rglob("*") if p.is_file())


def _fsync_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def begin_commit(root: Path) -> None:
    """Back up the shared metadata and list the files that exist, before LeRobot saves an episode."""
    backup = root / COMMIT_DIR
    shutil.rmtree(backup, ignore_errors=True)
    backup.mkdir()
    shared = [rel for rel in SHARED_FILES if (root / rel).is_file()]
    for rel in shared:
        shutil.copy2(root / rel, backup / rel.replace("/", "__"))
        with open(backup / rel.replace("/", "__"), "rb") as f:
            os.fsync(f.fileno())
    # Writing the manifest is the moment a rollback becomes possible; deleting it, the commit point.
    _fsync_write(backup / "manifest.json", json.dumps({"shared": shared, "files": _files(root)}))


def end_commit(root: Path) -> None:
    (root / COMMIT_DIR / "manifest.json").unlink()
    shutil.rmtree(root / COMMIT_DIR)


def recover(root: Path) -> bool:
    """Undo a save that was interrupted, and drop frames of an episode that was being recorded.

    Returns True when a save was rolled back."""
    backup, rolled_back = root / COMMIT_DIR, False
    manifest = backup / "manifest.json"
    if manifest.is_file():
        saved = json.loads(manifest.read_text())
        for rel in SHARED_FILES:
            if rel in saved["shared"]:
                shutil.copy2(backup / rel.replace("/", "__"), root / rel)
            else:
                (root / rel).unlink(missing_ok=True)
        for rel in set(_files(root)) - set(saved["files"]):
            (root / rel).unlink()
        rolled_back = True
        log.warning("%s: rolled back an episode whose save was interrupted", root)
    shutil.rmtree(backup, ignore_errors=True)
    shutil.rmtree(root / "images", ignore_errors=True)  # LeRobot's staging frames of an unsaved episode
    return rolled_back


class EpisodeStore:
    """A LeRobot dataset at ``root`` that gains whole episodes only (see the module docstring)."""

    def __init__(self, root: str | Path, repo_id: str, fps: int, features: dict,
                 robot_type: str = "so101_follower", image_writer_threads: int = 4):
        self.root, self.repo_id, self.fps = Path(root), repo_id, fps
        self.image_writer_threads = image_writer_threads
        quiet_encoders()
        if (self.root / "meta" / "info.json").is_file():
            recover(self.root)
            self.dataset = self._resume()
            self._check_matches(features)
        else:
            self.dataset = LeRobotDataset.create(repo_id, fps, features, root=self.root, robot_type=robot_type,
                                                 use_videos=True, image_writer_threads=image_writer_threads,
                                                 depth_encoder=QuietDepthEncoder())
        self.episodes = self.dataset.meta.total_episodes  # saved episodes
        self.frames = 0  # frames of the episode being recorded

    def _resume(self) -> LeRobotDataset:
        return LeRobotDataset.resume(self.repo_id, root=self.root, image_writer_threads=self.image_writer_threads,
                                     depth_encoder=QuietDepthEncoder())

    def _check_matches(self, features: dict) -> None:
        def shape(fts: dict) -> dict:
            return {k: (v["dtype"], tuple(v["shape"])) for k, v in fts.items() if k not in DEFAULT_FEATURES}
        if shape(self.dataset.meta.features) != shape(features) or self.dataset.meta.fps != self.fps:
            raise RecordingError(f"{self.root} holds a dataset recorded with other features or fps "
                                 f"({sorted(self.dataset.meta.features)} at {self.dataset.meta.fps} fps); "
                                 "record into a new root")

    def add(self, frame: dict) -> None:
        self.dataset.add_frame(frame)
        self.frames += 1

    def discard(self) -> None:
        if self.frames:
            self.dataset.clear_episode_buffer(delete_images=True)
        self.frames = 0

    def commit(self) -> int:
        """Save the episode being recorded, whole; returns the number of episodes in the dataset."""
        if not self.frames:
            raise RecordingError("no frames to save")
        begin_commit(self.root)
        try:
            # One stream after the other: parallel encoding forks this process, whose camera and bus
            # threads may hold locks at that moment. The encoder may not take real-time priority (sgvla.core.sched).
            with no_realtime():
                self.dataset.save_episode(parallel_encoding=False)
                self.dataset.finalize()  # closes this episode's parquet files: nothing later can damage them
        except Exception as e:
            with contextlib.suppress(Exception):
                self.dataset.finalize()  # let LeRobot flush now, so the rollback also undoes that
            recover(self.root)
            self.dataset, self.frames = self._resume(), 0
            raise RecordingError(f"saving the episode failed and was rolled back: {e}") from e
        end_commit(self.root)
        self.frames = 0
        self.episodes = self.dataset.meta.total_episodes
        self.dataset = self._resume()  # the next episode goes to new files; resumed now, not in its first tick
        return self.episodes

    def close(self) -> None:
        """Discard an unsaved episode and release the writer."""
        self.discard()
        if self.dataset is not None:
            with no_realtime():
                self.dataset.finalize()
            self.dataset = None


# -- operator commands -------------------------------------------------------------------

START, SAVE, RERECORD, ABORT, QUIT = "start", "save", "rerecord", "abort", "quit"
TOGGLE = "toggle"  # start when idle, save when recording
KEYMAP = {" ": TOGGLE, "\n": TOGGLE, "\r": TOGGLE, "s": TOGGLE, "r": RERECORD, "a": ABORT, "q": QUIT, "\x1b": QUIT}
HELP = "keys: space/enter = start or save episode, r = re-record, a = abort episode, q/esc = quit"
TOPIC_HELP = "commands on record_control (std_msgs/String): start, save, toggle, rerecord, abort, quit"


def operator_help(reads_terminal: bool) -> str:
    """A recorder node's line on how to operate it: the keys only when it reads a terminal (under a launch its stdin
    is none, and a key hint there sends the operator pressing keys nobody reads), the topic always."""
    return f"{HELP}; or {TOPIC_HELP}" if reads_terminal else TOPIC_HELP


class KeySource(Protocol):
    def poll(self) -> str | None: ...  # a command, without blocking


class KeyQueue:
    """Commands pushed from other threads (ROS callbacks, tests)."""

    def __init__(self):
        self._queue: queue.SimpleQueue[str] = queue.SimpleQueue()

    def put(self, command: str) -> None:
        command = KEYMAP.get(command, command)
        if command not in (TOGGLE, START, SAVE, RERECORD, ABORT, QUIT):
            raise ValueError(f"unknown recording command {command!r}")
        self._queue.put(command)

    def poll(self) -> str | None:
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None


class TerminalKeys:
    """Single key presses from stdin (a terminal in cbreak mode, or a pipe); a context manager."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdin
        self._saved = None

    def __enter__(self) -> TerminalKeys:
        if self.stream.isatty():
            self._saved = termios.tcgetattr(self.stream)
            tty.setcbreak(self.stream)
        return self

    def __exit__(self, *exc) -> None:
        if self._saved is not None:
            termios.tcsetattr(self.stream, termios.TCSADRAIN, self._saved)

    def poll(self) -> str | None:
        while select.select([self.stream], [], [], 0)[0]:
            char = os.read(self.stream.fileno(), 1).decode(errors="ignore")
            if not char:
                return None  # end of a piped stdin
            if char.lower() in KEYMAP:
                return KEYMAP[char.lower()]
        return None


# -- the loop ------------------------------------------------------------------------------

SceneGraphFn = Callable[[Mapping[str, np.ndarray], str], str]  # (images, task) -> graph JSON ("" if none)


@dataclass
class RecordStats:
    saved: int = 0  # episodes saved in this session
    discarded: int = 0
    frames: int = 0  # frames saved in this session
    periods: list[float] = field(default_factory=list)  # seconds between control ticks
    repeated: dict[str, int] = field(default_factory=dict)  # camera frames recorded twice (camera fell behind)
    skipped: dict[str, int] = field(default_factory=dict)  # camera frames never recorded (loop fell behind)
    save_seconds: list[float] = field(default_factory=list)  # per saved episode (video encoding mostly)
    # Per saved episode, the frames recorded twice because the loop fell behind the clock: a dataset at fps keeps
    # fps's timeline (frame k at k/fps), so a late tick records the frames it owes with its own inputs.
    filled: list[int] = field(default_factory=list)


class TeleopRecorder:
    """Leader -> follower teleoperation at ``fps``; frames go to ``store`` while an episode is recorded.

    ``auto_start`` starts each episode ``reset_time_s`` after the previous one ended (no keys needed);
    an episode ends (saved) after ``episode_time_s`` or on the save key. A lost camera or an arm fault
    discards the episode being recorded; arm faults then end the session (torque is already off).

    Frames follow the clock, not the ticks: LeRobot reads frame k of a dataset at ``fps`` as k/fps seconds in, so
    a tick that comes late (a loaded machine, an executor busy elsewhere) records the frames it owes since the
    episode's first frame, with its inputs repeated and counted (``stats.filled``); otherwise an episode of
    ``episode_time_s`` would hold fewer frames and replay faster than it happened. Camera frames stay in order.
    """

    def __init__(self, follower: FollowerArm, leader: LeaderArm, cameras: list[Camera], store: EpisodeStore,
                 task: str, fps: float, keys: KeySource, num_episodes: int, episode_time_s: float,
                 reset_time_s: float = 0.0, auto_start: bool = False, scene_graph: SceneGraphFn | None = None):
        self.follower, self.leader, self.cameras, self.store = follower, leader, cameras, store
        self.task, self.period, self.keys = task, 1.0 / fps, keys
        self.num_episodes, self.episode_time_s, self.reset_time_s = num_episodes, episode_time_s, reset_time_s
        self.auto_start, self.scene_graph = auto_start, scene_graph
        names = [c.config.name for c in cameras]
        self.stats = RecordStats(repeated=dict.fromkeys(names, 0), skipped=dict.fromkeys(names, 0))
        self.recording = False
        self.done = False
        self._start_pending = False  # a start asked for while a camera was reconnecting
        self._phase_start = time.monotonic()
        self._last: dict[str, Frame] = {}  # per camera, the frame recorded last
        self._first_frame_at = 0.0  # monotonic time of the episode's frame 0
        self._filled = 0  # frames of the episode recorded twice (a late tick)

    def run(self) -> RecordStats:
        """Tick at the control rate until the episodes are recorded or the operator quits."""
        next_tick = last = time.monotonic()
        try:
            while not self.done:
                self.tick()
                next_tick += self.period
                time.sleep(max(0.0, next_tick - time.monotonic()))
                now = time.monotonic()
                self.stats.periods.append(now - last)
                last = now
                if now - next_tick > self.period:  # fell behind (an episode save blocks the loop): resync
                    next_tick = now
        finally:
            if self.recording:
                self._discard("session ended")
        return self.stats

    def tick(self) -> None:
        """One control step: read both arms, command the follower, record a frame, handle a command."""
        goal = self.leader.read().positions
        state = self.follower.read().positions
        self.follower.command(goal)
        sent = self.follower.step() or state  # None only while holding, i.e. goal = present
        for _ in range(self._frames_owed() if self.recording else 0):
            self._record(state, sent)
            if not self.recording:  # discarded (a lost camera)
                break
        self._handle(self.keys.poll())

    def _frames_owed(self) -> int:
        """1, or more when this tick is late on the episode's clock: frame k is due at k/fps after frame 0."""
        now = time.monotonic()
        if not self.store.frames:
            self._first_frame_at, self._filled = now, 0
            return 1
        due = math.floor((now - self._first_frame_at) / self.period + 0.5) + 1  # the frames a steady loop has
        owed = max(1, due - self.store.frames)
        self._filled += owed - 1
        return owed

    def _record(self, state: Mapping[str, float], sent: Mapping[str, float]) -> None:
        frame = {"observation.state": np.array([state[j] for j in JOINTS], np.float32),
                 "action": np.array([sent[j] for j in JOINTS], np.float32), "task": self.task}
        for camera in self.cameras:
            name = camera.config.name
            if not camera.connected:
                self._discard(f"camera {name} lost")
                return
            # Every camera frame once, in order, at most one frame behind the newest: phase jitter between
            # the loop and the camera then neither repeats nor drops frames.
            first = not self.store.frames
            image = camera.latest() if first else camera.next_frame(self._last[name].index)
            if image is None:
                image = self._last[name]
                self.stats.repeated[name] += 1
            elif not first:
                self.stats.skipped[name] += image.index - self._last[name].index - 1
            self._last[name] = image
            frame[f"observation.images.{name}"] = image.color
            if image.depth is not None:
                frame[f"observation.images.{name}_depth"] = image.depth
        if self.scene_graph is not None:
            prefix = "observation.images."
            images = {k.removeprefix(prefix): v for k, v in frame.items() if k.startswith(prefix)}
            frame[SCENE_GRAPH] = self.scene_graph(images, self.task)
        self.store.add(frame)

    def _handle(self, command: str | None) -> None:
        elapsed = time.monotonic() - self._phase_start
        if command == TOGGLE:
            command = SAVE if self.recording else START
        if command == QUIT:
            if self.recording:
                self._discard("quit")
            self.done = True
        elif self.recording and (command == SAVE or elapsed >= self.episode_time_s):
            self._save()
        elif self.recording and command == RERECORD:
            self._discard("re-record")
            self._start()
        elif self.recording and command == ABORT:
            self._discard("aborted")
        elif self._start_pending and command == ABORT:
            self._start_pending = False
            log.info("episode %d: start cancelled", self.store.episodes)
        elif not self.recording and (command == START or self._start_pending
                                     or (self.auto_start and elapsed >= self.reset_time_s)):
            self._start_when_cameras_are_in()

    def _start_when_cameras_are_in(self) -> None:
        """Start now, or as soon as every camera streams again. A save blocks the loop for seconds and the cameras
        read as lost meanwhile; they are back within their reconnect period, and an episode started before that
        would be discarded at its first frame ("camera lost") although nothing is wrong."""
        lost = [c.config.name for c in self.cameras if not c.connected]
        if lost:
            if not self._start_pending:
                log.info("episode %d: starts when camera(s) %s stream again", self.store.episodes, lost)
            self._start_pending = True
            return
        self._start_pending = False
        self._start()

    def _start(self) -> None:
        self.recording = True
        self._phase_start = time.monotonic()
        log.info("episode %d: recording (%s)", self.store.episodes, self.task)

    def _save(self) -> None:
        frames, started = self.store.frames, time.monotonic()
        try:
            total = self.store.commit()
        except RecordingError as e:
            self.stats.discarded += 1
            log.error("episode %d: %s", self.store.episodes, e)
            self._stop_recording()
            return
        self.stats.saved += 1
        self.stats.frames += frames
        self.stats.save_seconds.append(time.monotonic() - started)
        self.stats.filled.append(self._filled)
        late = f" ({self._filled} recorded twice: the loop fell behind {1 / self.period:g} Hz)" if self._filled else ""
        log.info("episode %d: saved, %d frames%s, in %.1f s", total - 1, frames, late, self.stats.save_seconds[-1])
        self._stop_recording()
        self.done = self.stats.saved >= self.num_episodes

    def _discard(self, why: str) -> None:
        self.store.discard()
        self.stats.discarded += 1
        log.warning("episode %d: discarded (%s)", self.store.episodes, why)
        self._stop_recording()

    def _stop_recording(self) -> None:
        self.recording = False
        self._phase_start = time.monotonic()
