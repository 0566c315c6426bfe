"""Twin cameras render off the control path: each on a thread of its own with OpenGL contexts of its own, at a lower
priority, so a camera that stalls delays neither the other camera nor physics."""

import os
import threading
import time

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from sgvla.so101.hardware.cameras import RENDER_NICE, Camera, CameraConfig, TwinSource  # noqa: E402
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
    small = dict(source="twin", width=64, height=48, fps=30)
    cameras, clock = [], None
    try:
        twin.render_model  # noqa: B018  (made before the cameras start, as the node does)
        stalled = Camera(CameraConfig(name="agentview", device="agentview", depth=True, **small),
                         StalledSource(CameraConfig(name="agentview", device="agentview", depth=True, **small), twin,
                                       gate)).start(60.0)
        cameras.append(stalled)
        config = CameraConfig(name="wrist", device="wrist", **small)
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
