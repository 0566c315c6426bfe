"""One evaluation episode: reset with the perturbation, then every control step compute the live
graph, compose the prompt, run the policy and step the environment, until success or the limit.

Everything here works on small protocols (a backend with reset/step/scene/ground_truth,
episode_info and a pick_place(target, place) controller factory; a `Policy`), so LIBERO and the
SO101 twin run the same loop, and the in-process loop and the ROS node graph run the same code for the same seeds.
"""

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from sgvla.eval.context import Context, build_context, needs_context
from sgvla.eval.graph_source import GroundTruthSource
from sgvla.eval.video import EpisodeVideo
from sgvla.core.protocols import Policy, StepInput
from sgvla.scene_graph import Ontology


@dataclass(frozen=True)
class Episode:
    policy: str
    task_id: int
    perturbation: str
    mode: str
    seed: int


def episode_info(backend) -> dict[str, Any]:
    """Privileged facts scripted policies may use (learned policies ignore them): the backend's
    ``episode_info()`` (``goal`` = (target, place), ``table_center``), plain data that can cross topics."""
    return backend.episode_info()


class EpisodeRunner:
    """Runs episodes of one backend (task + perturbation) with any policy and mode."""

    def __init__(self, backend, ontology: Ontology, view: str = "agentview", style: str = "reference",
                 max_steps: int | None = None, video_dir: Path | None = None, graph_source=None):
        self.backend = backend
        self.source = graph_source or GroundTruthSource(backend)
        self.ontology = ontology
        self.view = view
        self.style = style
        self.max_steps = backend.max_steps if max_steps is None else max_steps
        self.video_dir = video_dir  # an MP4 per episode when set

    def _context(self, mode: str, task: str, obs, scene) -> Context:
        view_graph = self.source.view_graph(self.view, obs, scene, task) if needs_context(mode) else None
        return build_context(mode, task, view_graph, self.view, self.ontology, self.style)

    def close(self) -> None:
        self.source.close()
        self.backend.close()

    def run(self, episode: Episode, policy: Policy) -> dict[str, Any]:
        t0 = time.perf_counter()
        obs = self.backend.reset(episode.seed)
        task = self.backend.task
        # The controller factory stays in process: scripted policies drive the backend's own arm with it.
        info = {**episode_info(self.backend), "pick_place": self.backend.pick_place}
        scene = self.backend.scene()
        reference = self.backend.ground_truth([self.view], scene=scene)[self.view]  # for the record
        self.source.reset()
        context = self._context(episode.mode, task, obs, scene)
        policy.reset(context.prompt)
        budget = policy.prompt_budget(context.prompt)
        start_prompt = context.prompt
        success, steps, overhead = False, 0, 0.0
        video = None
        if self.video_dir is not None:
            name = f"{episode.policy}_t{episode.task_id}_{episode.mode}_s{episode.seed}.mp4".replace("/", "-")
            video = EpisodeVideo(self.video_dir / name)
        try:
            while steps < self.max_steps:
                if steps and needs_context(episode.mode):
                    t = time.perf_counter()
                    context = self._context(episode.mode, task, obs, scene)
                    overhead += time.perf_counter() - t
                action = policy.act(StepInput(obs.raw, context.prompt, scene, info))
                if video is not None:
                    video.add(obs.images, f"step {steps}  {episode.mode}\n{context.prompt}")
                obs, success, done = self.backend.step(action)
                steps += 1
                if success or done:
                    break
                scene = self.backend.scene()
        finally:
            if video is not None:
                video.close()
        wall = time.perf_counter() - t0
        return {
            "policy": episode.policy, "task_id": episode.task_id, "perturbation": episode.perturbation,
            "mode": episode.mode, "seed": episode.seed, "success": bool(success), "steps": steps,
            "max_steps": self.max_steps, "wall_time_s": round(wall, 3),
            "context_ms_per_step": round(1000 * overhead / max(steps - 1, 1), 4),
            "video": str(video.path) if video is not None else "",
            "task": task, "prompt": start_prompt, "view": self.view,
            "graph_source": self.source.name, "graph_triplets": len(reference.graph),
            "triplets_in_prompt": context.triplets_in_prompt, "visible_objects": sorted(reference.boxes),
            **self.source.stats(),
            "prompt_tokens": budget.tokens if budget else None,
            "prompt_budget": budget.budget if budget else None,
            "triplets_kept": budget.triplets_kept if budget else None,
            "prompt_truncated": budget.truncated if budget else False,
            "failure_reason": "" if success else "step limit reached",
            **{f"decision_{k}": v for k, v in policy.decision().items()},
        }
