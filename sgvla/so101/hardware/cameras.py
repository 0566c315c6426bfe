"""Cameras: OpenCV/V4L2 devices, Intel RealSense (color + depth aligned to color), a synthetic source, the
SO101 MuJoCo twin's cameras (``source: twin``), and frames pushed in from elsewhere (ROS image topics). Each driver
is a registered :class:`CameraConfig` (``source`` in a rig file) with its own options and source of frames.

Each :class:`Camera` reads its source in a background thread and keeps only the newest frame, so a
control loop never waits on a camera. A camera that fails mid-run (unplugged, driver hiccup) is
reopened every ``reconnect_s`` until it answers again; the first open happens at :meth:`Camera.start`
so that a wrong device is an error at startup rather than a silent retry loop.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import cv2
import numpy as np

from sgvla.core.registry import Choice
from sgvla.so101.cameras import AGENTVIEW, CAMERAS

log = logging.getLogger(__name__)


class CameraError(RuntimeError):
    pass


@dataclass
class CameraConfig(Choice, kind="camera driver", key="source"):
    """A rig camera. Its driver is a registered choice named by the YAML key ``source`` (``opencv``, ``realsense``,
    ``synthetic``, ``twin``), each with options of its own (``device``: what it opens); the fields here are every
    driver's. An unknown driver or option fails when the rig loads, with the valid ones in the message."""

    name: str = AGENTVIEW  # dataset key observation.images.<name>; ROS topics under <name>/
    width: int = 640
    height: int = 480
    fps: int = 30
    depth: bool = False  # also a depth stream aligned to color (drivers that stream one: streams_depth)
    calibration: str = ""  # camera_info YAML: a name in calibration/ or a path ("" = none)
    frame_id: str = ""  # "" = <name>_optical_frame
    streams_depth: ClassVar[bool] = False  # the driver can stream depth aligned to color
    needs_twin: ClassVar[bool] = False  # the driver renders a running SO101 twin's camera

    def __post_init__(self):
        if not self.type:
            raise TypeError(f"CameraConfig is the kind of camera driver; build a registered one: "
                            f"{sorted(self.choices())}")
        if self.depth and not self.streams_depth:
            drivers = sorted(n for n, c in self.choices().items() if c.streams_depth)
            raise ValueError(f"camera {self.name}: depth needs a driver that streams it ({', '.join(drivers)}); "
                             f"{self.type} does not")
        if min(self.width, self.height, self.fps) <= 0:
            raise ValueError(f"camera {self.name}: width, height and fps must be > 0")
        self.frame_id = self.frame_id or f"{self.name}_optical_frame"

    def describe(self) -> str:
        """The driver and what it opens, for logs (``opencv /dev/video6``)."""
        return self.type

    def make_source(self, twin: Any = None) -> Source:
        """The driver's source of frames; ``twin`` (a running So101Twin) for drivers that render one."""
        raise NotImplementedError


@CameraConfig.register("opencv")
@dataclass
class OpenCVCameraConfig(CameraConfig):
    device: int | str = 0  # a V4L2 index or a /dev/video* path (`v4l2-ctl --list-devices`)

    def __post_init__(self):
        super().__post_init__()
        if self.device == "" or (isinstance(self.device, int) and self.device < 0):
            raise ValueError(f"camera {self.name}: device must be a video index >= 0 or a /dev/video* path")

    def describe(self) -> str:
        return f"{self.type} {self.device}"

    def make_source(self, twin: Any = None) -> Source:
        return OpenCVSource(self)


@CameraConfig.register("realsense")
@dataclass
class RealSenseCameraConfig(CameraConfig):
    device: str = ""  # serial number; "" = the only RealSense plugged in (`rs-enumerate-devices`)
    streams_depth: ClassVar[bool] = True

    def describe(self) -> str:
        return f"{self.type} {self.device or '(first found)'}"

    def make_source(self, twin: Any = None) -> Source:
        return RealSenseSource(self)


@CameraConfig.register("synthetic")
@dataclass
class SyntheticCameraConfig(CameraConfig):
    streams_depth: ClassVar[bool] = True

    def make_source(self, twin: Any = None) -> Source:
        return SyntheticSource(self)


@CameraConfig.register("twin")
@dataclass
class TwinCameraConfig(CameraConfig):
    device: str = ""  # the twin's camera (sgvla.so101.cameras.CAMERAS); "" = the camera's name
    streams_depth: ClassVar[bool] = True
    needs_twin: ClassVar[bool] = True

    def __post_init__(self):
        super().__post_init__()
        self.device = self.device or self.name
        if self.device not in CAMERAS:
            raise ValueError(f"camera {self.name}: the twin has no camera {self.device!r}; it has {list(CAMERAS)} "
                             "(set the camera's device)")

    def describe(self) -> str:
        return f"{self.type} {self.device}"

    def make_source(self, twin: Any = None) -> Source:
        if twin is None:
            raise CameraError(f"camera {self.name}: source twin renders from a running SO101 twin; start one "
                              "(`sgvla record --config twin`, `sgvla launch hardware sim=true`)")
        return TwinSource(self, twin)


@dataclass(frozen=True)
class Frame:
    color: np.ndarray  # (H, W, 3) uint8 RGB
    depth: np.ndarray | None  # (H, W, 1) uint16 millimetres, pixel-aligned with color
    stamp: float  # time.monotonic() at capture
    index: int  # frames captured by this Camera so far (1-based); gaps never happen, repeats are visible


class Source(Protocol):
    def open(self) -> None: ...
    def grab(self) -> tuple[np.ndarray, np.ndarray | None]: ...  # blocks until the next frame
    def close(self) -> None: ...


class OpenCVSource:
    def __init__(self, config: OpenCVCameraConfig):
        self.config = config
        self.capture: cv2.VideoCapture | None = None

    def open(self) -> None:
        c = self.config
        device = int(c.device) if isinstance(c.device, str) and c.device.isdigit() else c.device
        capture = cv2.VideoCapture(device, cv2.CAP_V4L2)
        if not capture.isOpened():
            raise CameraError(f"camera {c.name}: cannot open video device {c.device!r} "
                              "(list devices with `lerobot-find-cameras opencv` or `v4l2-ctl --list-devices`)")
        capture.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter_fourcc(*"MJPG"))  # raw YUYV cannot do 640x480@30 on USB2
        capture.set(cv2.CAP_PROP_FRAME_WIDTH, c.width)
        capture.set(cv2.CAP_PROP_FRAME_HEIGHT, c.height)
        capture.set(cv2.CAP_PROP_FPS, c.fps)
        got = (int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)))
        if got != (c.width, c.height):
            capture.release()
            raise CameraError(f"camera {c.name}: device {c.device!r} gives {got[0]}x{got[1]}, not {c.width}x{c.height}")
        self.capture = capture

    def grab(self) -> tuple[np.ndarray, None]:
        ok, bgr = self.capture.read()
        if not ok:
            raise CameraError(f"camera {self.config.name}: no frame from {self.config.device!r}")
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), None

    def close(self) -> None:
        if self.capture is not None:
            self.capture.release()
            self.capture = None


class RealSenseSource:
    """Color, and depth aligned to the color camera's pixels (rs.align), depth in millimetres."""

    def __init__(self, config: RealSenseCameraConfig):
        self.config = config
        self.pipeline = None

    def open(self) -> None:
        import pyrealsense2 as rs  # imported here: only machines with a RealSense need the library

        c = self.config
        rs_config = rs.config()
        if c.device:
            rs_config.enable_device(c.device)
        rs_config.enable_stream(rs.stream.color, c.width, c.height, rs.format.rgb8, c.fps)
        if c.depth:
            rs_config.enable_stream(rs.stream.depth, c.width, c.height, rs.format.z16, c.fps)
        pipeline = rs.pipeline()
        try:
            profile = pipeline.start(rs_config)
        except RuntimeError as e:
            raise CameraError(f"camera {c.name}: cannot start RealSense {c.device or '(first found)'} at "
                              f"{c.width}x{c.height}@{c.fps}: {e} (list devices with `rs-enumerate-devices`)") from e
        self.align = rs.align(rs.stream.color) if c.depth else None
        self.mm_per_unit = profile.get_device().first_depth_sensor().get_depth_scale() * 1000.0 if c.depth else 0.0
        self.pipeline = pipeline

    def grab(self) -> tuple[np.ndarray, np.ndarray | None]:
        try:
            frames = self.pipeline.wait_for_frames(timeout_ms=2000)
        except RuntimeError as e:
            raise CameraError(f"camera {self.config.name}: {e}") from e
        if self.align is None:
            return np.asanyarray(frames.get_color_frame().get_data()).copy(), None
        frames = self.align.process(frames)
        color = np.asanyarray(frames.get_color_frame().get_data()).copy()
        depth = np.asanyarray(frames.get_depth_frame().get_data())
        if self.mm_per_unit != 1.0:  # e.g. D405 counts 0.1 mm
            depth = np.clip(depth * self.mm_per_unit, 0, 65535)
        return color, depth.astype(np.uint16)[..., None]

    def close(self) -> None:
        if self.pipeline is not None:
            self.pipeline.stop()
            self.pipeline = None


class SyntheticSource:
    """Frames made up at the configured rate: a square that moves with the frame count over a gradient,
    and a depth ramp (600..900 mm) with the square 100 mm closer. ``unplug`` plays a pulled cable."""

    def __init__(self, config: CameraConfig):
        self.config = config
        h, w = config.height, config.width
        y, x = np.mgrid[0:h, 0:w]
        self.background = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1),
                                    np.full_like(x, 96)], axis=-1).astype(np.uint8)
        self.depth_background = (600 + y * 300 // max(h - 1, 1)).astype(np.uint16)[..., None]
        self.count = 0
        self.next_t = 0.0
        self.unplugged_until = 0.0

    def unplug(self, seconds: float) -> None:
        self.unplugged_until = time.monotonic() + seconds

    def open(self) -> None:
        if time.monotonic() < self.unplugged_until:
            raise CameraError(f"camera {self.config.name}: synthetic device unplugged")
        self.next_t = time.monotonic()

    def grab(self) -> tuple[np.ndarray, np.ndarray | None]:
        self.next_t += 1.0 / self.config.fps
        time.sleep(max(0.0, self.next_t - time.monotonic()))
        if time.monotonic() < self.unplugged_until:
            raise CameraError(f"camera {self.config.name}: synthetic device unplugged")
        self.count += 1
        h, w = self.config.height, self.config.width
        side = max(h // 6, 1)
        x0 = (self.count * 7) % max(w - side, 1)
        y0 = (h - side) // 2
        color = self.background.copy()
        color[y0:y0 + side, x0:x0 + side] = (255, 255, 255)
        depth = None
        if self.config.depth:
            depth = self.depth_background.copy()
            depth[y0:y0 + side, x0:x0 + side] -= 100
        return color, depth

    def close(self) -> None:
        pass


RENDER_NICE = 10  # niceness of render threads: a saturated CPU serves the control loop first


def lower_priority(nice: int) -> None:
    """Raise the calling thread's niceness by ``nice`` (Linux schedules threads on their own; threads it starts
    later, like a software rasterizer's, inherit it). Lowering priority needs no privilege; where the platform has
    no per-thread niceness, the thread keeps the process's."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError as e:
        log.debug("render thread keeps its priority: %s", e)


def depth_to_mm(metres: np.ndarray) -> np.ndarray:
    """Depth in metres (H, W) -> (H, W, 1) uint16 millimetres, as a RealSense aligned depth stream gives it
    (0 where nothing was measured, clipped at 65.535 m)."""
    metres = np.nan_to_num(np.asarray(metres, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    return np.clip(np.rint(metres * 1000.0), 0, 65535).astype(np.uint16).reshape(*metres.shape[:2], 1)


class TwinSource:
    """A camera of the SO101 MuJoCo twin (``sgvla.so101.twin.twin.So101Twin``), rendered at the configured rate.

    ``device`` names the twin's camera (one of ``sgvla.so101.cameras.CAMERAS``); color is upright RGB, depth the
    rendered depth in millimetres. Each source draws on a render thread of its own with OpenGL contexts of its own
    (``twin.view()``: the twin's lock is held only to copy the scene), so cameras draw side by side and a slow one
    delays neither the others nor physics. The render thread runs ``nice``-r than the rest of the process (its
    software rasterizer threads inherit that): on a CPU that rendering saturates, the control loop, joint states
    and the servo bus are scheduled first and the camera rate gives way."""

    def __init__(self, config: TwinCameraConfig, twin: Any, nice: int = RENDER_NICE):
        if config.device not in twin.cameras:
            raise CameraError(f"camera {config.name}: the twin has no camera {config.device!r}; "
                              f"it has {list(twin.cameras)} (set the camera's device)")
        self.config, self.twin, self.nice = config, twin, nice
        self.next_t = 0.0
        self._view: Any = None
        self._thread: ThreadPoolExecutor | None = None

    def open(self) -> None:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"render {self.config.name}",
                                              initializer=lower_priority, initargs=(self.nice,))
        self.next_t = time.monotonic()

    def frame(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Render now (on the source's render thread): (H, W, 3) uint8 RGB and, for depth cameras, (H, W, 1)
        uint16 millimetres."""
        thread = self._thread  # read once: close() (from another thread) may end it meanwhile
        if thread is None:
            raise CameraError(f"camera {self.config.name}: open() the source before rendering")
        try:
            future = thread.submit(self._render)
        except RuntimeError as e:  # closed meanwhile: "cannot schedule new futures after shutdown"
            raise CameraError(f"camera {self.config.name}: closed while a frame was asked for ({e})") from e
        return future.result()

    def _render(self) -> tuple[np.ndarray, np.ndarray | None]:
        if self._view is None:
            self._view = self.twin.view()
        c = self.config
        if not c.depth:
            return self._view.render(c.device, width=c.width, height=c.height), None
        color, depth = self._view.render_rgbd(c.device, width=c.width, height=c.height)  # one physics instant
        return color, depth_to_mm(depth)

    def grab(self) -> tuple[np.ndarray, np.ndarray | None]:
        self.next_t = max(self.next_t + 1.0 / self.config.fps, time.monotonic() - 1.0 / self.config.fps)
        time.sleep(max(0.0, self.next_t - time.monotonic()))
        return self.frame()

    def close(self) -> None:
        """Frees the OpenGL contexts on the thread they belong to, then ends it (a later open starts a new one)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if self._view is not None:
            view, self._view = self._view, None
            thread.submit(view.close).result()
        thread.shutdown()


class PushedSource:
    """Frames handed in by another thread (a ROS image subscription): :meth:`grab` returns the next one.

    Opening fails while no frame came for ``timeout_s``, so a :class:`Camera` over a silent topic reads
    as disconnected (and reconnects when frames come back)."""

    def __init__(self, config: CameraConfig, timeout_s: float = 1.0):
        self.config, self.timeout_s = config, timeout_s
        self._frames: queue.Queue[tuple[np.ndarray, np.ndarray | None]] = queue.Queue(maxsize=2)
        self.last_push = -float("inf")

    def push(self, color: np.ndarray, depth: np.ndarray | None = None) -> None:
        """Hand in a frame (the oldest waiting one is dropped when the consumer falls behind)."""
        c = self.config
        want = (c.height, c.width)
        if color.shape != (*want, 3) or (c.depth and (depth is None or depth.shape != (*want, 1))):
            raise CameraError(f"camera {c.name}: got color {color.shape}, depth "
                              f"{None if depth is None else depth.shape}; the rig says {c.height}x{c.width}"
                              + (" with depth" if c.depth else ""))
        if self._frames.full():
            with contextlib.suppress(queue.Empty):
                self._frames.get_nowait()
        with contextlib.suppress(queue.Full):  # another producer came first: this frame is the one dropped
            self._frames.put_nowait((color, depth if c.depth else None))
        self.last_push = time.monotonic()

    @property
    def ready(self) -> bool:
        return not self._frames.empty()

    def open(self) -> None:
        if time.monotonic() - self.last_push > self.timeout_s:
            raise CameraError(f"camera {self.config.name}: no frame for {self.timeout_s:.1f} s")

    def grab(self) -> tuple[np.ndarray, np.ndarray | None]:
        try:
            return self._frames.get(timeout=self.timeout_s)
        except queue.Empty:
            raise CameraError(f"camera {self.config.name}: no frame for {self.timeout_s:.1f} s") from None

    def close(self) -> None:
        pass


def make_source(config: CameraConfig, twin: Any = None) -> Source:
    """The source a camera config's driver opens; ``twin`` (a running So101Twin) renders ``source: twin`` cameras."""
    return config.make_source(twin)


class Camera:
    def __init__(self, config: CameraConfig, source: Source | None = None, reconnect_s: float = 1.0):
        self.config = config
        self.source = source or make_source(config)
        self.reconnect_s = reconnect_s
        self.connected = False
        self.reconnects = 0  # times the source failed mid-run and was reopened
        self._latest: Frame | None = None
        self._recent: collections.deque[Frame] = collections.deque(maxlen=4)
        self._new = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"camera {config.name}", daemon=True)

    def start(self, first_frame_timeout_s: float = 20.0) -> Camera:
        """Open the source and return once its first frame is in (errors here name the device). The first frame
        comes after the device starts streaming (seconds for a RealSense) or, for a twin camera, after its OpenGL
        context and meshes are set up: more than 5 s on a loaded 2-core machine (`sgvla record --config twin` under
        the stress script failed so)."""
        self.source.open()
        self.connected = True
        self._thread.start()
        try:
            self.wait_newer(0, first_frame_timeout_s)
        except CameraError:
            self.close()
            raise
        return self

    def latest(self) -> Frame | None:
        return self._latest

    def next_frame(self, after: int, max_lag: int = 1) -> Frame | None:
        """The frame following ``after`` for a consumer that wants every frame once: the next one if it is
        at most ``max_lag`` frames behind the newest, else the one ``max_lag`` behind (frames in between
        are skipped). None while no frame is newer than ``after``."""
        with self._new:
            recent = list(self._recent)
        if not recent or recent[-1].index <= after:
            return None
        wanted = max(after + 1, recent[-1].index - max_lag)
        return next((f for f in recent if f.index >= wanted), recent[-1])

    def wait_newer(self, index: int, timeout_s: float) -> Frame:
        """The newest frame with an index above ``index``, waiting at most ``timeout_s``."""
        with self._new:
            if not self._new.wait_for(lambda: self._latest is not None and self._latest.index > index, timeout_s):
                raise CameraError(f"camera {self.config.name}: no new frame within {timeout_s:.2f} s"
                                  + ("" if self.connected else " (disconnected, reconnecting)"))
            return self._latest

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        self.source.close()
        self.connected = False

    def _run(self) -> None:
        index = 0
        while not self._stop.is_set():
            if not self.connected:
                try:
                    self.source.open()
                except Exception as e:  # any driver error: keep trying until closed
                    log.debug("camera %s: reopen failed: %s", self.config.name, e)
                    self._stop.wait(self.reconnect_s)
                    continue
                self.connected = True
                log.warning("camera %s: reconnected", self.config.name)
            try:
                color, depth = self.source.grab()
            except Exception as e:
                what = str(e) if str(e).startswith(f"camera {self.config.name}") else f"camera {self.config.name}: {e}"
                log.warning("%s; reconnecting every %.1f s", what, self.reconnect_s)
                self.connected = False
                self.reconnects += 1
                self.source.close()
                continue
            index += 1
            with self._new:
                self._latest = Frame(color, depth, time.monotonic(), index)
                self._recent.append(self._latest)
                self._new.notify_all()
