"""The evaluation plan: which policies, tasks, perturbations, context modes and seeds.

Loaded from `config/eval/*.yaml` (see `sgvla.core.config`), overridable from the command line with
`key=value`. Every (policy, task, perturbation, mode, seed) is one episode; all modes share the
same seeds and perturbations, so std-vs-sg comparisons are matched pairs.

Every enumerated or bounded setting is checked when the config is built, with the valid values in
the message, so a typo stops the run before the first episode; nothing is silently replaced
(`max_steps: null` means the suite's limit, `max_steps: 0` is an error).
"""

import math
from dataclasses import dataclass, field

from sgvla.policies.registry import LEROBOT_TYPES, PolicySpec

MODES = ("standard", "scene_graph", "scene_graph_full", "bounding_boxes", "scene_graph_bounding_boxes")
GRAPH_SOURCES = ("ground_truth", "vlm")
# What an episode whose infrastructure failed (graph source, simulator, worker process) does to the run:
# retry_later records it as an infrastructure failure and goes on (the next run of the plan retries it);
# stop records it and ends the run.
ON_INFRA_FAILURE = ("retry_later", "stop")
LEARNED = frozenset((*LEROBOT_TYPES, "lerobot"))  # policy types that read camera images
# Pixels, inclusive: the range both suites' renderers were run at (policies are trained at 128-256).
IMAGE_SIZES = (32, 1024)
LIBERO_SPATIAL_TASKS = tuple(range(10))
# Per suite: its task ids, its objects' ontology, and the perturbation files it understands (None: any).
SUITES = {
    "libero_spatial": {"tasks": LIBERO_SPATIAL_TASKS, "ontology": "libero_spatial", "perturbations": None},
    "so101_twin": {"tasks": tuple(range(5)), "ontology": "so101_tabletop", "perturbations": ("none",)},
}


def suite_views(suite: str) -> tuple[str, ...]:
    """Cameras whose graph a plan of `suite` can inject: LIBERO's scene cameras (graphs project into any of
    them), the twin's two."""
    if suite == "so101_twin":
        from sgvla.so101.twin.scene import AGENTVIEW, WRIST

        return AGENTVIEW, WRIST
    from sgvla.libero.perturbations import CAMERAS

    return CAMERAS


def _choice(key: str, value, valid) -> None:
    if value not in valid:
        raise ValueError(f"unknown {key} {value!r}; choose from {list(valid)}")


def _duplicates(items: list) -> list:
    return sorted({x for x in items if items.count(x) > 1}, key=str)


@dataclass
class EvalConfig:
    name: str = "eval"
    suite: str = "libero_spatial"  # libero_spatial (LIBERO backend) | so101_twin (the SO101 MuJoCo twin)
    policies: list[PolicySpec] = field(default_factory=lambda: [PolicySpec(type="prompt_grounded")])
    tasks: list[int] = field(default_factory=lambda: list(LIBERO_SPATIAL_TASKS))
    perturbations: str = "table7"  # a file of config/perturbations/
    modes: list[str] = field(default_factory=lambda: ["standard", "scene_graph"])
    episodes: int = 10  # seeds seed_offset .. seed_offset + episodes - 1
    seed_offset: int = 0
    graph_source: str = "ground_truth"
    vlm_client: str | None = None  # graph_source=vlm: a config/vlm/clients name or a client YAML path
    vlm_rate_hz: float = 1.0  # at most this many VLM queries per second (latest frame wins)
    vlm_max_graph_age_s: float = 60.0  # the live graph may describe a frame this old; older: infra failure
    view: str = "agentview"
    context_style: str = "reference"  # reference | compact | json
    render_profile: str = "reference"  # reference (what learned policies were trained on) | fast
    image_size: int = 256
    max_steps: int | None = None  # None: the task suite's limit (LIBERO-Spatial: 280, so101_twin: 300)
    workers: int = 1
    output_dir: str = "outputs/eval"
    video: bool = False  # an MP4 per episode (cameras + the live graph) under output_dir/videos
    render_images: bool | None = None  # None: only when a learned policy, the VLM or the video needs images
    on_infra_failure: str = "retry_later"  # retry_later | stop (see ON_INFRA_FAILURE)

    def __post_init__(self):
        from sgvla.scene_graph.serialize import STYLES
        from sgvla.libero.render import RENDER_PROFILES

        bad = [m for m in self.modes if m not in MODES]
        if bad:
            raise ValueError(f"unknown mode(s) {bad}; choose from {list(MODES)}")
        for key in ("modes", "tasks", "policies"):
            if not getattr(self, key):
                raise ValueError(f"{key} is empty")
        _choice("suite", self.suite, SUITES)
        suite = SUITES[self.suite]
        bad = [t for t in self.tasks if t not in suite["tasks"]]
        if bad:
            raise ValueError(f"unknown task id(s) {bad}; {self.suite} has tasks 0..{len(suite['tasks']) - 1}")
        for key in ("modes", "tasks"):
            if _duplicates(getattr(self, key)):
                raise ValueError(f"{key} lists {_duplicates(getattr(self, key))} more than once")
        if suite["perturbations"] is not None and self.perturbations not in suite["perturbations"]:
            raise ValueError(f"perturbations {self.perturbations!r} are not supported by the {self.suite} suite; "
                             f"it supports {list(suite['perturbations'])}")
        _choice("graph_source", self.graph_source, GRAPH_SOURCES)
        _choice("view", self.view, suite_views(self.suite))
        _choice("context_style", self.context_style, STYLES)
        _choice("render_profile", self.render_profile, RENDER_PROFILES)
        _choice("on_infra_failure", self.on_infra_failure, ON_INFRA_FAILURE)
        if self.graph_source == "vlm":
            if not self.vlm_client:
                raise ValueError("graph_source=vlm needs vlm_client (a config/vlm/clients name or YAML path)")
            boxed = [m for m in self.modes if "bounding_boxes" in m]
            if boxed:
                raise ValueError(f"modes {boxed} need boxes, which a VLM graph source does not give")
        elif self.vlm_client:
            raise ValueError(f"vlm_client {self.vlm_client!r} is set but graph_source is {self.graph_source!r}; "
                             "set graph_source=vlm or drop vlm_client")
        for key in ("vlm_rate_hz", "vlm_max_graph_age_s"):
            value = getattr(self, key)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{key} must be a positive number of {'Hz' if key.endswith('hz') else 'seconds'}, "
                                 f"got {value}")
        bounds = {"episodes": (self.episodes, 1), "workers": (self.workers, 1), "seed_offset": (self.seed_offset, 0)}
        if self.max_steps is not None:
            bounds["max_steps"] = (self.max_steps, 1)
        for key, (value, low) in bounds.items():
            if value < low:
                hint = " (leave it out, or null, for the suite's limit)" if key == "max_steps" else ""
                raise ValueError(f"{key} must be >= {low}, got {value}{hint}")
        low, high = IMAGE_SIZES
        if not low <= self.image_size <= high:
            raise ValueError(f"image_size must be within {low}..{high} pixels, got {self.image_size}")
        if not self.output_dir:
            raise ValueError("output_dir is empty")
        if self.render_images is False and self.images_needed:
            raise ValueError("render_images=false, but a learned policy, the VLM graph source or video needs images")
        if self.suite == "so101_twin":
            learned = [p.type for p in self.policies if p.type in LEARNED]
            if learned or self.graph_source == "vlm":
                raise ValueError(f"the so101_twin suite runs scripted policies on ground-truth graphs; "
                                 f"not supported: {learned or ['graph_source=vlm']}")

    @property
    def images_needed(self) -> bool:
        """A learned policy, the VLM graph source or the video reads camera images."""
        return self.video or self.graph_source == "vlm" or any(p.type in LEARNED for p in self.policies)

    @property
    def needs_images(self) -> bool:
        """Whether episodes render camera images (`render_images`, by default when they are needed)."""
        return self.images_needed if self.render_images is None else self.render_images

    @property
    def ontology(self) -> str:
        return SUITES[self.suite]["ontology"]

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed_offset, self.seed_offset + self.episodes))
