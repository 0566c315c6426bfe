"""Graphs a VLM predicts from the camera image: the ``vlm`` graph source (registered here).

    graph_source: {type: vlm, client: qwen2_5_vl_7b, rate_hz: 1.0, max_graph_age_s: 60}

The VLM is built once per process (a model load is expensive) and shared by every episode of the run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sgvla.core.episode import InfrastructureFailure
from sgvla.core.graph_source import GraphSourceConfig
from sgvla.scene_graph import Ontology, ViewGraph


class GraphSourceError(InfrastructureFailure):
    """The VLM cannot give this episode a graph: an infrastructure failure, never a policy's."""

    kind = "graph_source"


class VLMSource:
    """Graphs a VLM predicts from the camera image, through the same latest-frame worker the
    `vlm_query` node runs: the loop submits every frame and reads the newest answer, so a slow VLM
    only makes the graph older. No boxes.

    Failures (the VLM is down, answers an HTTP error, garbage or nothing, or stalls past the client's
    timeout) never become graphs; an episode whose graph source fails raises `GraphSourceError`, which
    the runner records as an infrastructure failure, not as a policy failure:

    - the first graph of an episode must be a valid answer about its own first frame (awaited up to
      `first_timeout_s`); if that query fails, the episode fails at once;
    - afterwards the live graph is the newest valid answer, however many queries fail in between, as
      long as the frame it describes is at most `max_age_s` old; an older one fails the episode;
    - every query is counted in the record: `vlm_queries`, `vlm_failed_queries` (with the last reason
      in `vlm_failure`) and `vlm_truncated_answers` (cut at the token limit, complete triplets kept);
      and every answer entry: `vlm_entries` examined, `vlm_triplets_kept`, `vlm_dropped_by_reason` (reason ->
      entries, the reasons of `sgvla.scene_graph.parse.DROP_REASONS`), `vlm_rejected_entries`.
    """

    name = "vlm"

    def __init__(self, vlm, upright: Callable[[np.ndarray], np.ndarray], rate_hz: float = 1.0, max_age_s: float = 60.0,
                 first_timeout_s: float = 300.0):
        self.vlm = vlm
        self.upright = upright  # the suite's (SuiteConfig.upright): LIBERO stores images turned, the SO101 upright
        self.rate_hz = rate_hz
        self.max_age_s = max_age_s
        self.first_timeout_s = first_timeout_s
        self.worker = None
        self.view_used = None
        self.oldest_used_s = 0.0

    def reset(self) -> None:
        from sgvla.vlm.live import LatestFrameWorker

        if self.worker is not None:
            self.worker.close()
        self.worker = LatestFrameWorker(self.vlm, self.rate_hz)
        self.view_used = None
        self.oldest_used_s = 0.0

    def view_graph(self, view: str, observation, scene, task: str) -> ViewGraph:
        from sgvla.vlm.prompts import canonical_camera

        w = self.worker
        if w is None:
            raise RuntimeError("VLMSource.reset() must start each episode")
        if view not in observation.images:
            raise ValueError(f"the VLM needs an image of view {view!r}, but this episode renders "
                             f"{sorted(observation.images)}")
        self.view_used = view
        w.submit(self.upright(observation.images[view]), task, canonical_camera(view))  # upright, as in vlm-bench
        live = w.latest_valid()
        if live is None:
            live = self._first(w)
        age = live.age_s
        if age > self.max_age_s:
            raise GraphSourceError(f"VLM: the newest valid graph is {age:.1f} s old (graph_source.max_graph_age_s "
                                   f"{self.max_age_s:g}); {w.failed} of {w.attempts} queries failed, last: "
                                   f"{w.last_error}")
        self.oldest_used_s = max(self.oldest_used_s, age)
        return ViewGraph(view, live.answer.graph, {})

    def _first(self, w):
        deadline = time.monotonic() + self.first_timeout_s
        while True:
            attempts = w.attempts  # read before the answer: a counted answer is already published
            live = w.latest_valid()
            if live is not None:
                return live
            if attempts:
                raise GraphSourceError(f"VLM: the first query of the episode failed: {w.last_error}")
            if time.monotonic() > deadline:
                raise GraphSourceError(f"VLM: no answer within {self.first_timeout_s:g} s")
            time.sleep(0.01)

    def stats(self) -> dict:
        w = self.worker
        return {} if w is None else {
            "vlm_queries": w.attempts, "vlm_failed_queries": w.failed, "vlm_truncated_answers": w.truncated,
            "vlm_rejected_entries": w.rejected_entries, "vlm_answers_with_rejections": w.answers_with_rejections,
            "vlm_entries": w.entries, "vlm_triplets_kept": w.kept,
            "vlm_dropped_by_reason": dict(sorted(w.dropped_by_reason.items())),
            "vlm_frames_dropped": w.dropped, "vlm_view": self.view_used, "vlm_failure": w.last_error,
            "vlm_graph_age_max_s": round(self.oldest_used_s, 3)}

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


_VLMS: dict[tuple[str, str], Any] = {}  # (client, ontology) -> SceneGraphVLM, one per process


@GraphSourceConfig.register("vlm")
@dataclass
class VLMSourceConfig(GraphSourceConfig):
    """``client``: a config/vlm/clients name or a client YAML path; ``rate_hz``: at most this many queries per
    second (latest frame wins); ``max_graph_age_s``: the live graph may describe a frame this old, an older one
    is an infrastructure failure."""

    client: str = ""
    rate_hz: float = 1.0
    max_graph_age_s: float = 60.0

    gives_boxes: ClassVar[bool] = False
    reads_images: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not self.client:
            raise ValueError("graph_source vlm needs a client (a config/vlm/clients name or a YAML path)")
        for key, unit in (("rate_hz", "Hz"), ("max_graph_age_s", "seconds")):
            value = getattr(self, key)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{key} must be a positive number of {unit}, got {value}")

    def client_config(self, ontology: Ontology | None = None):
        from sgvla.vlm.config import load_client_config

        return load_client_config(self.client, ontology=ontology)

    def check_environment(self, plan: Any) -> None:
        """The client (its file, its API key) and the camera whose image it reads, in every task of `plan`."""
        from sgvla.scene_graph import load_ontology
        from sgvla.vlm.prompts import canonical_camera, load_prompt

        self.client_config(load_ontology(plan.ontology)).check_environment()
        described = load_prompt().cameras
        if canonical_camera(plan.view) not in described:
            raise ValueError(f"graph_source=vlm: the VLM prompt describes the cameras {sorted(described)}, "
                             f"not view {plan.view!r}")
        for task in plan.tasks:
            cameras = plan.suite.cameras_of(task, plan.perturbations)
            if plan.view not in cameras:
                raise ValueError(f"graph_source=vlm reads the image of view {plan.view!r}, which task {task} does "
                                 f"not render under perturbations {plan.perturbations!r} (its cameras: "
                                 f"{list(cameras)})")

    def stored_settings(self) -> dict[str, Any]:
        """The client as this plan resolves it (the file behind `client` can change), with the prompt's label."""
        import dataclasses

        from sgvla.vlm.prompts import load_prompt

        client = self.client_config()
        return {"type": client.type, **dataclasses.asdict(client), "prompt": load_prompt().label}

    def make(self, backend: Any, ontology: Ontology, upright: Callable[[np.ndarray], np.ndarray]) -> VLMSource:
        from sgvla.vlm.config import make_vlm
        from sgvla.vlm.prompts import load_prompt

        key = (self.client, ontology.name)
        if key not in _VLMS:
            _VLMS[key] = make_vlm(self.client_config(ontology), load_prompt(), ontology)
        return VLMSource(_VLMS[key], upright, self.rate_hz, self.max_graph_age_s)
