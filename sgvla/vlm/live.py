"""Scene graphs for a control loop: the VLM runs in a background thread and never blocks it.

The loop hands over frames with :meth:`LatestFrameWorker.submit` and reads the newest graph with
:meth:`LatestFrameWorker.latest`; both return at once. Only the most recent frame waits to be
queried (a newer one replaces it: latest frame wins), and queries start at most ``rate_hz``
times per second, so a slow or failing VLM only makes the graph older, never the loop slower.
:meth:`LatestFrameWorker.latest_valid` is the newest answer that is a graph; failed queries (the
client raised, the request failed, the answer holds no graph) are counted, never served as graphs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from sgvla.vlm.client import GraphAnswer, GraphQuery, SceneGraphVLM

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveGraph:
    answer: GraphAnswer
    frame_time: float  # time.monotonic() when the frame was submitted
    done_time: float

    @property
    def age_s(self) -> float:
        """Seconds since the frame this graph describes was captured."""
        return time.monotonic() - self.frame_time


class LatestFrameWorker:
    def __init__(self, vlm: SceneGraphVLM, rate_hz: float = 1.0) -> None:
        if rate_hz <= 0:
            raise ValueError("rate_hz must be > 0")
        self.vlm = vlm
        self.period = 1.0 / rate_hz
        self.dropped = 0  # frames replaced before they were queried
        self.queried = 0  # answers received (failed ones included)
        self.raised = 0  # queries whose client raised
        self.failed = 0  # queries that gave no graph: raised, errored, or an answer without one
        self.truncated = 0  # answers cut at the token limit (their complete triplets are kept)
        # Entries of answers that were not valid triplets of the ontology (dropped; the valid ones are kept), and
        # the answers that had any: a partly wrong answer is a graph, but not the whole of what the model said.
        self.rejected_entries = 0
        self.answers_with_rejections = 0
        self.entries = 0  # answer entries examined (triplets or not)
        self.kept = 0  # triplets kept
        self.dropped_by_reason: Counter[str] = Counter()  # entries dropped, by reason (a cut one: TRUNCATED)
        self.last_error = ""  # why the last failed query failed
        self._pending: tuple[GraphQuery, float] | None = None
        self._latest: LiveGraph | None = None
        self._latest_valid: LiveGraph | None = None
        self._failure: str | None = None
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="vlm-latest-frame", daemon=True)
        self._thread.start()

    def submit(self, images: tuple[np.ndarray, ...] | np.ndarray, task: str, camera: str) -> None:
        images = (images,) if isinstance(images, np.ndarray) else tuple(images)
        with self._cond:
            if self._pending is not None:
                self.dropped += 1
            self._pending = (GraphQuery(images, task, camera), time.monotonic())
            self._cond.notify()

    def latest(self) -> LiveGraph | None:
        """The newest answered graph (errors included: check ``answer.completion.error``)."""
        return self._latest

    def latest_valid(self) -> LiveGraph | None:
        """The newest answer that is a graph (``GraphAnswer.failure`` empty)."""
        return self._latest_valid

    @property
    def attempts(self) -> int:
        """Queries finished so far, answered or raised."""
        return self.queried + self.raised

    @property
    def failure(self) -> str | None:
        """The last exception the VLM raised, if any; the worker keeps running."""
        return self._failure

    def _loop(self) -> None:
        next_start = 0.0
        while True:
            with self._cond:
                while self._pending is None and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
            delay = next_start - time.monotonic()
            if delay > 0:
                with self._cond:
                    self._cond.wait_for(lambda: self._stop, timeout=delay)
                    if self._stop:
                        return
            with self._cond:
                query, stamp = self._pending
                self._pending = None
            next_start = time.monotonic() + self.period
            try:
                answer = self.vlm.query([query])[0]
            except Exception as exc:  # a live loop must outlive any VLM failure
                self._failure = self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("VLM query failed")
                self.failed += 1
                self.raised += 1
                continue
            live = LiveGraph(answer, stamp, time.monotonic())
            self.truncated += answer.truncated
            self.rejected_entries += len(answer.parsed.rejected)
            self.answers_with_rejections += bool(answer.parsed.rejected)
            self.entries += answer.parsed.n_lines
            self.kept += len(answer.parsed.triplets)
            self.dropped_by_reason.update(answer.parsed.dropped_by_reason(answer.truncated))
            if answer.failure:
                self.last_error = answer.failure
                self.failed += 1
            else:
                self._latest_valid = live
            self._latest = live
            self.queried += 1

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def __enter__(self) -> LatestFrameWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
