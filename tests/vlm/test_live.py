"""The live worker never blocks the loop, keeps only the newest frame and respects its rate."""

import threading
import time

import numpy as np

from sgvla.scene_graph import load_ontology
from sgvla.vlm.client import Completion, SceneGraphVLM
from sgvla.vlm.live import LatestFrameWorker
from sgvla.vlm.prompts import load_prompt

from ..waiting import wait_until


class SlowBackend:
    model_id = "slow"

    def __init__(self, delay: float, fail_first: bool = False) -> None:
        self.delay, self.fail_first = delay, fail_first
        self.seen: list[str] = []
        self.starts: list[float] = []
        self.release = threading.Event()

    def complete(self, requests):
        self.starts.append(time.monotonic())
        time.sleep(self.delay)
        if self.fail_first and len(self.starts) == 1:
            raise RuntimeError("device lost")
        self.seen += [r.user.split("Task: ")[1].split("\n")[0] for r in requests]
        return [Completion("(plate_1, is_left_of, cookies_1)", self.delay) for _ in requests]

    def close(self):
        pass


def worker(backend, rate_hz):
    return LatestFrameWorker(SceneGraphVLM(backend, load_prompt(), load_ontology("libero_spatial")), rate_hz)


def test_latest_frame_wins_without_blocking():
    backend = SlowBackend(delay=0.3)
    image = np.zeros((8, 8, 3), np.uint8)
    with worker(backend, rate_hz=100) as w:
        assert w.latest() is None
        start = time.monotonic()
        for i in range(20):
            w.submit(image, f"step {i}", "agentview")
        assert time.monotonic() - start < 0.1  # submitting never waits for the VLM
        wait_until(lambda: backend.seen and backend.seen[-1] == "step 19", 5, "the last frame's query")
        wait_until(lambda: w.latest() is not None and w.queried == len(backend.seen), 5, "its answer")
    assert len(backend.seen) <= 3 and w.dropped >= 17
    live = w.latest()
    assert list(live.answer.graph) == [("plate_1", "is_left_of", "cookies_1")] and live.age_s >= 0


def test_rate_limit_and_survives_failures():
    backend = SlowBackend(delay=0.0, fail_first=True)
    image = np.zeros((8, 8, 3), np.uint8)
    with worker(backend, rate_hz=5) as w:
        for i in range(4):
            w.submit(image, f"step {i}", "agentview")
            wait_until(lambda: len(backend.starts) == i + 1, 5, f"query {i + 1}")
        assert w.failure == "RuntimeError: device lost" and w.latest() is not None
    gaps = np.diff(backend.starts)
    assert (gaps >= 0.19).all(), gaps
