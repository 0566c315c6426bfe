"""The in-process episode loop (`sgvla.eval.loop.EpisodeRunner.run`) cut in the halves the node graph runs.

`SimSession` is the simulator half (sim_bridge): build the backend as the evaluation `Worker` does, reset,
step, and say what a step's state is. `PolicySession` is the policy half (vla_policy): compose the prompt
per context mode with `build_context` from the step's view graph, reset and step the policy, and collect
its part of the record. `episode_record` assembles the record the evaluator writes: the keys of
`EpisodeRunner.run` plus those `Worker.run` adds. Between the halves only (episode, step)-keyed messages
pass; with lock-step stepping the sequence of calls on each side is the in-process one, so the same seeds
give the same actions and outcomes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sgvla.eval.context import Context, build_context, needs_context
from sgvla.eval.loop import Episode, episode_info
from sgvla.core.protocols import PromptBudget, StepInput
from sgvla.policies.registry import PolicySpec
from sgvla.scene_graph import Graph, Ontology, ViewGraph
from sgvla.libero.expert import PickPlaceController

LEARNED = {"act", "smolvla", "pi0", "pi05", "lerobot"}  # as sgvla.eval.runner: these need camera images
HOLD_ACTION = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0])  # LIBERO's no-op: keep the pose, gripper open


# -- simulator half ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class SimSettings:
    """What a backend is built from (`Worker._make_runner`); a change rebuilds it."""

    task_id: int
    perturbation: str
    render_profile: str
    image_size: int
    render_images: bool


@dataclass
class StepState:
    """One step's outcome and state, as sim_bridge publishes it."""

    episode: int
    step: int
    max_steps: int
    success: bool
    done: bool
    task: str
    observation: Any  # sgvla.libero.env.Observation
    scene: Any  # sgvla.libero.env.SceneState
    info: dict[str, Any]

    def payload(self) -> dict[str, Any]:
        """What policies and the scene_graph node read, for `codec.encode`: the scene, the episode facts,
        and the raw observation without its images (those travel on the camera topics)."""
        raw = self.observation.raw
        pixel_keys = {}
        for camera, image in self.observation.images.items():
            pixel_keys[camera] = next(k for k, v in raw.get("pixels", {}).items() if v is image)
        rest = {k: v for k, v in raw.items() if k != "pixels"}
        return {"scene": self.scene, "info": self.info, "raw": rest, "pixel_keys": pixel_keys,
                "has_pixels": "pixels" in raw}


def raw_observation(payload: dict[str, Any], images: dict[str, np.ndarray]) -> dict[str, Any]:
    """LeRobot's raw observation rebuilt from a state payload and the stored-convention camera images.
    Cameras missing from `images` are left out (policies that read no images are not sent any)."""
    raw = dict(payload["raw"])
    if payload["has_pixels"]:
        pixels = {key: images[cam] for cam, key in payload["pixel_keys"].items() if cam in images}
        raw = {"pixels": pixels, **raw}
    return raw


class SimSession:
    """The simulator half of the loop. One backend at a time, rebuilt when its settings change (the
    in-process Worker rebuilds on a task change), so both run the same sequence of resets and steps."""

    def __init__(self):
        self.backend = None
        self.settings: SimSettings | None = None
        self.episode = -1
        self.steps = 0
        self.max_steps = 0
        self.success = False
        self.done = True
        self.observation = None
        self.info: dict[str, Any] = {}

    def _backend(self, settings: SimSettings):
        if self.backend is None or settings != self.settings:
            from sgvla.libero.env import make_backend

            self.close()
            self.backend = make_backend(settings.task_id, render_profile=settings.render_profile,
                                        perturbation=settings.perturbation, image_size=settings.image_size,
                                        render_images=settings.render_images)
            self.settings = settings
        return self.backend

    def reset(self, episode: int, settings: SimSettings, seed: int, max_steps: int = 0) -> StepState:
        backend = self._backend(settings)
        self.observation = backend.reset(seed)
        self.info = episode_info(backend)
        self.episode, self.steps = episode, 0
        self.max_steps = max_steps or backend.max_steps
        self.success, self.done = False, False
        return self.state()

    def step(self, action: np.ndarray) -> StepState:
        if self.done:
            raise RuntimeError(f"episode {self.episode} is over; reset first")
        self.observation, success, done = self.backend.step(action)
        self.steps += 1
        self.success = bool(success)
        self.done = bool(success or done or self.steps >= self.max_steps)
        return self.state()

    def state(self) -> StepState:
        return StepState(self.episode, self.steps, self.max_steps, self.success, self.done, self.backend.task,
                         self.observation, self.backend.scene(), self.info)

    def perturbation_applied(self) -> str:
        from sgvla.eval.runner import describe

        return describe(self.backend.perturbation)

    @property
    def cameras(self) -> tuple[str, ...]:
        return tuple(self.backend.cameras) if self.backend is not None else ()

    def camera_intrinsics(self) -> dict[str, np.ndarray]:
        """K per observed camera at the rendered image size."""
        if self.backend is None or self.backend._rig is None:
            return {}
        return {cam: self.backend._rig.intrinsics(cam) for cam in self.backend._rig.names}

    def joint_names(self) -> tuple[list[str], list[str]]:
        """(arm joints, gripper joints) of the robot, in the order of the raw observation's robot_state."""
        robot = self.backend.env._env.robots[0]
        return list(robot.robot_joints), list(getattr(robot.gripper, "joints", []))

    @property
    def settle_steps(self) -> int:
        return int(self.backend.config.settle_steps) if self.backend is not None else 0

    @property
    def control_period_s(self) -> float:
        return 1.0 / float(getattr(self.backend.env, "control_freq", 20) if self.backend else 20)

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None
            self.settings = None


# -- scene graphs of a state --------------------------------------------------------------------------

def view_graphs(scene: Any, views: list[str] | None = None) -> dict[str, ViewGraph]:
    """Ground-truth graph and boxes per camera of a (possibly namespace-decoded) SceneState, as
    `LiberoBackend.ground_truth(views, scene)` computes them for the observed cameras."""
    from sgvla.scene_graph import ground_truth_batch

    cameras = scene.cameras if views is None else {v: scene.cameras[v] for v in views}
    batch = ground_truth_batch(scene.objects, scene.geoms, scene.positions[None], cameras, scene.task)
    return {view: graphs.frame(0) for view, graphs in batch.items()}


def view_graph_from_parts(camera: str, triplets: list[tuple[str, str, str]], objects: list[str],
                          boxes: list[int]) -> ViewGraph:
    """The ViewGraph a GraphContext message carries (objects in the original box order)."""
    flat = [int(b) for b in boxes]
    if len(flat) != 4 * len(objects):
        raise ValueError(f"{len(objects)} objects need {4 * len(objects)} box values, got {len(flat)}")
    return ViewGraph(camera, Graph.of(triplets),
                     {name: tuple(flat[4 * i:4 * i + 4]) for i, name in enumerate(objects)})


# -- policy half ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EpisodeSpec:
    """What the evaluator tells the policy node about the next episode."""

    episode: int
    policy: PolicySpec
    policy_name: str
    task_id: int
    perturbation: str
    mode: str
    seed: int
    image_size: int = 256
    view: str = "agentview"
    context_style: str = "reference"
    graph_source: str = "ground_truth"

    @property
    def needs_images(self) -> bool:
        return self.policy.type in LEARNED


def make_policy(spec: PolicySpec, ontology: Ontology, image_size: int):
    """As `Worker.policy`: scripted policies from the registry, learned ones with LIBERO's env config."""
    from sgvla.policies import scripted  # noqa: F401  (registers the scripted policies)
    from sgvla.policies.registry import make_policy_from_spec

    env_cfg = None
    if spec.type in LEARNED:
        from sgvla.policies.lerobot_vla import libero_env_config

        env_cfg = libero_env_config(observation_height=image_size, observation_width=image_size)
    return make_policy_from_spec(spec, ontology=ontology, env_cfg=env_cfg)


@dataclass
class PolicySession:
    """The policy half of one episode, call for call as `EpisodeRunner.run` makes them."""

    spec: EpisodeSpec
    policy: Any
    ontology: Ontology
    context: Context | None = None
    start_prompt: str = ""
    budget: PromptBudget | None = None
    reference: ViewGraph | None = None
    steps: int = 0
    context_s: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    def _context(self, task: str, view_graph: ViewGraph | None) -> Context:
        vg = view_graph if needs_context(self.spec.mode) else None
        return build_context(self.spec.mode, task, vg, self.spec.view, self.ontology, self.spec.context_style)

    def needs_graph(self, step: int) -> bool:
        """The view graph of `step` is read at the first step (the record's reference) and, in context modes,
        at every step (the live graph)."""
        return step == 0 or needs_context(self.spec.mode)

    def act(self, step: int, task: str, observation: dict[str, Any], scene: Any, info: dict[str, Any],
            view_graph: ViewGraph | None, graph_s: float = 0.0) -> np.ndarray:
        """The action for `step`; `graph_s` is what computing `view_graph` cost elsewhere (the scene_graph
        node), counted as context overhead as the in-process loop counts its ground-truth call."""
        if step == 0:
            self.reference = view_graph
            self.context = self._context(task, view_graph)
            self.policy.reset(self.context.prompt)
            self.budget = self.policy.prompt_budget(self.context.prompt)
            self.start_prompt = self.context.prompt
        elif needs_context(self.spec.mode):
            t = time.perf_counter()
            self.context = self._context(task, view_graph)
            self.context_s += time.perf_counter() - t + graph_s
        # The node graph simulates LIBERO (sim_bridge), whose controller needs no simulator handle: it is made
        # here, on the policy's side of the topics, where the in-process loop takes the backend's.
        info = {**info, "pick_place": PickPlaceController}
        action = self.policy.act(StepInput(observation, self.context.prompt, scene, info))
        self.steps = step + 1
        return np.asarray(action, dtype=np.float64).reshape(-1)

    def report(self) -> dict[str, Any]:
        """The policy's part of the record (`episode_record` arguments)."""
        ref = self.reference
        return {
            "prompt": self.start_prompt,
            "budget": self.budget,
            "triplets_in_prompt": self.context.triplets_in_prompt if self.context else 0,
            "graph_triplets": len(ref.graph) if ref is not None else 0,
            "visible_objects": sorted(ref.boxes) if ref is not None else [],
            "context_s": self.context_s,
            "decision": self.policy.decision(),
            "steps_acted": self.steps,
        }


def decision_json(decision: dict[str, Any]) -> str:
    return json.dumps(decision, sort_keys=True, default=_jsonable)


def _jsonable(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"{type(x).__name__} is not JSON serializable")


# -- the record ---------------------------------------------------------------------------------------

def episode_record(episode: Episode, *, success: bool, steps: int, max_steps: int, wall_s: float, task: str,
                   view: str, graph_source: str, render_profile: str, perturbation_applied: str,
                   report: dict[str, Any]) -> dict[str, Any]:
    """The JSONL record of one episode run over topics: the keys and values `Worker.run` writes in process
    (`EpisodeRunner.run` plus perturbation_applied and render_profile)."""
    budget = report["budget"]
    context_s = report["context_s"]
    record = {
        "policy": episode.policy, "task_id": episode.task_id, "perturbation": episode.perturbation,
        "mode": episode.mode, "seed": episode.seed, "success": bool(success), "steps": steps,
        "max_steps": max_steps, "wall_time_s": round(wall_s, 3),
        "context_ms_per_step": round(1000 * context_s / max(steps - 1, 1), 4),
        "video": "",  # over topics, --record writes the run's topics (images included) instead of MP4s
        "task": task, "prompt": report["prompt"], "view": view,
        "graph_source": graph_source, "graph_triplets": report["graph_triplets"],
        "triplets_in_prompt": report["triplets_in_prompt"], "visible_objects": list(report["visible_objects"]),
        "prompt_tokens": budget.tokens if budget else None,
        "prompt_budget": budget.budget if budget else None,
        "triplets_kept": budget.triplets_kept if budget else None,
        "prompt_truncated": budget.truncated if budget else False,
        "failure_reason": "" if success else "step limit reached",
        **{f"decision_{k}": v for k, v in report["decision"].items()},
    }
    record["perturbation_applied"] = perturbation_applied
    record["render_profile"] = render_profile
    return record
