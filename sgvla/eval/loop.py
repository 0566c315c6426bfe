"""One episode in process: the backend's reset and steps around the episode engine (`sgvla.core.episode`).

The ROS policy node drives the same engine from topics, so both give the same records for the same seeds: the
engine sees the scene of every step, the last one's included (the sim_bridge publishes each step's scene, so the
policy node passes the same ones), and tracks progress with the suite's stages (`SuiteConfig.stages`), which
whoever builds the engine gives it.
"""

from collections.abc import Callable
from pathlib import Path

import numpy as np

from sgvla.core.episode import Episode, EpisodeRecord, InfrastructureFailure
from sgvla.core.protocols import Backend, Step


def run_episode(backend: Backend, engine: Episode, video_dir: Path | None = None,
                upright: Callable[[np.ndarray], np.ndarray] | None = None) -> EpisodeRecord:
    """Reset the backend with the episode's seed and step it with the engine's actions until the episode ends; the
    video (with `video_dir`) shows the images turned upright by `upright` (the suite's `SuiteConfig.upright`).
    The backend's controller factory stays in process: scripted policies drive the backend's own arm with it."""
    obs = backend.reset(engine.key.seed)
    engine.info.update(backend.episode_info(), pick_place=backend.pick_place)
    scene = backend.scene()
    reference = backend.ground_truth([engine.view], scene=scene)[engine.view]  # the record's reference graph
    engine.start(backend.task, Step(obs, scene), reference)
    video = None
    if video_dir is not None:
        from sgvla.eval.video import EpisodeVideo  # OpenCV and PyAV's encoder: loaded by runs that record videos

        key = engine.key
        if upright is None:
            raise ValueError("a video needs `upright`, the suite's way of turning its images upright")
        video = EpisodeVideo(video_dir / f"{key.policy}_t{key.task_id}_{key.mode}_s{key.seed}.mp4".replace("/", "-"),
                             upright)
    try:
        while not engine.done:
            action = engine.act(Step(obs, scene))
            if action is None:  # the policy gave up: a failure with its reason
                break
            if video is not None:
                video.add(obs.images, f"step {engine.steps}  {engine.key.mode}\n{engine.context.prompt}")
            obs, success, done = backend.step(action)
            scene = backend.scene()
            if engine.observe(success, done, scene):
                break
    finally:
        if video is not None:
            video.close()
    if engine.no_action():  # nothing of the policy to record (sgvla.core.episode): the runner retries it
        raise InfrastructureFailure(engine.no_action())
    return engine.record(**backend.record_facts(), video=str(video.path) if video is not None else "")
