"""Where the live graph of an episode comes from: simulator ground truth, or a VLM looking at the
camera image. Both return a `ViewGraph` for the current instant, so the loop composes prompts the
same way whichever source it has.
"""

import time

from sgvla.scene_graph import ViewGraph


class GroundTruthSource:
    """Graphs and boxes computed from simulator geometry (the paper's live context)."""

    name = "ground_truth"

    def __init__(self, backend):
        self.backend = backend

    def reset(self) -> None:
        pass

    def view_graph(self, view: str, observation, scene, task: str) -> ViewGraph:
        return self.backend.ground_truth([view], scene=scene)[view]

    def stats(self) -> dict:
        return {}

    def close(self) -> None:
        pass


class VLMSource:
    """Graphs a VLM predicts from the camera image, through the same latest-frame worker the
    `vlm_query` node runs: the loop submits every frame and reads the newest answer, so a slow VLM
    only makes the graph older. The first graph of an episode is awaited (up to
    `first_timeout_s`) so that every episode starts from a graph of its own scene. No boxes."""

    name = "vlm"

    def __init__(self, vlm, rate_hz: float = 1.0, first_timeout_s: float = 300.0):
        self.vlm = vlm
        self.rate_hz = rate_hz
        self.first_timeout_s = first_timeout_s
        self.worker = None
        self.view_used = None

    def reset(self) -> None:
        from sgvla.vlm.live import LatestFrameWorker

        if self.worker is not None:
            self.worker.close()
        self.worker = LatestFrameWorker(self.vlm, self.rate_hz)
        self.view_used = None

    def view_graph(self, view: str, observation, scene, task: str) -> ViewGraph:
        from sgvla.vlm.prompts import canonical_camera

        if self.worker is None:
            raise RuntimeError("VLMSource.reset() must start each episode")
        # LIBERO stores images bottom-up; the VLM sees them upright, as in vlm-bench.
        self.view_used = view if view in observation.images else next(iter(observation.images))
        image = observation.images[self.view_used][::-1, ::-1]
        self.worker.submit(image, task, canonical_camera(self.view_used))
        live = self.worker.latest()
        deadline = time.monotonic() + self.first_timeout_s
        while live is None:
            if time.monotonic() > deadline or self.worker.failure:
                raise RuntimeError(f"no VLM graph within {self.first_timeout_s:.0f} s: {self.worker.failure}")
            time.sleep(0.01)
            live = self.worker.latest()
        graph = live.answer.graph  # an errored answer parses to the empty graph
        return ViewGraph(self.view_used, graph, {})

    def stats(self) -> dict:
        w = self.worker
        return {} if w is None else {"vlm_queries": w.queried, "vlm_frames_dropped": w.dropped,
                                     "vlm_view": self.view_used, "vlm_failure": w.failure or ""}

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
