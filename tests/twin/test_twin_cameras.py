"""Twin cameras render off the control path: each on a thread of its own with OpenGL contexts of its own, at a lower
priority, so a camera that stalls delays neither the other camera nor physics."""

import os
import threading
import time

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from sgvla.so101.cameras import AGENTVIEW, WRIST  # noqa: E402
from sgvla.so101.hardware.cameras import RENDER_NICE, Camera, TwinCameraConfig, TwinSource  # noqa: E402
from sgvla.so101.twin.bus import TwinClock  # noqa: E402
from sgvla.so101.twin.config import load_twin_config  # noqa: E402
from sgvla.so101.twin.twin import So101Twin  # noqa: E402

pytestmark = pytest.mark.sim


class StalledSource(TwinSource):
    """A twin camera whose frames hang while ``gate`` is closed (a driver stuck mid-frame)."""

    def __init__(self, config, twin, gate: threading.Event):
        super().__init__(config, twin)
        self.gate = gate

    def _render(self):
        self.gate.wait(60)
        return super()._render()


def test_a_stalled_camera_delays_neither_the_other_camera_nor_physics():
    twin = So101Twin(load_twin_config(), 0)
    gate = threading.Event()
    gate.set()
    small = dict(width=64, height=48, fps=30)
    cameras, clock = [], None
    try:
        twin.render_model  # noqa: B018  (made before the cameras start, as the node does)
        stalled = Camera(TwinCameraConfig(name=AGENTVIEW, depth=True, **small),
                         StalledSource(TwinCameraConfig(name=AGENTVIEW, depth=True, **small), twin, gate)).start(60.0)
        cameras.append(stalled)
        config = TwinCameraConfig(name=WRIST, **small)
        wrist = Camera(config, TwinSource(config, twin)).start(60.0)
        cameras.append(wrist)
        clock = TwinClock(twin).start()
        gate.clear()  # the agentview camera hangs in its next frame
        time.sleep(0.5)
        frames, ticks, stuck = wrist.latest().index, clock.ticks, stalled.latest().index
        time.sleep(2.0)
        assert stalled.latest().index <= stuck + 1  # it really hangs (one frame may have been past the gate)
        assert wrist.latest().index - frames >= 3, "the wrist camera waited on the stalled one"
        assert clock.ticks - ticks >= 10, "physics waited on a camera"
        # Render threads are separate and run at a lower priority than the control loop.
        threads = [c.source._thread.submit(threading.get_native_id).result(timeout=5) for c in (wrist,)]
        assert threading.get_native_id() not in threads
        assert os.getpriority(os.PRIO_PROCESS, threads[0]) >= min(19, os.getpriority(os.PRIO_PROCESS, 0) + RENDER_NICE)
    finally:
        gate.set()
        for camera in cameras:
            camera.close()
        if clock is not None:
            clock.close()
        twin.close()


class CountingLock:
    """The twin's lock, counting how often it is taken (physics may step between two holds)."""

    def __init__(self, lock):
        self.lock, self.holds = lock, 0

    def __enter__(self):
        self.lock.__enter__()
        self.holds += 1
        return self

    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)


def test_a_depth_cameras_color_and_depth_show_one_physics_instant():
    """so101_twin publishes a color image and its depth under one stamp, and fiducial_graphs refines poses with the
    depth of that stamp: both must be drawn from one copy of the scene, taken in one hold of the lock."""
    twin = So101Twin(load_twin_config(), 0)
    view = twin.view()
    try:
        twin.reset(0)
        color, depth = view.render("agentview", 64, 48), view.render_depth("agentview", 64, 48)
        twin.lock = counting = CountingLock(twin.lock)
        pair = view.render_rgbd("agentview", 64, 48)
        assert counting.holds == 1
        assert (pair[0] == color).all() and (pair[1] == depth).all() and pair[1].dtype == depth.dtype
    finally:
        view.close()
        twin.close()
