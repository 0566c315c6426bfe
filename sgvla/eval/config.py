"""The evaluation plan: which policies, tasks, perturbations, context modes and seeds.

Loaded from `config/eval/*.yaml` (see `sgvla.core.config`), overridable from the command line with
`key=value`. Every (policy, task, perturbation, mode, seed) is one episode; all modes share the
same seeds and perturbations, so std-vs-sg comparisons are matched pairs.
"""

from dataclasses import dataclass, field

from sgvla.policies.registry import PolicySpec

MODES = ("standard", "scene_graph", "scene_graph_full", "bounding_boxes", "scene_graph_bounding_boxes")
GRAPH_SOURCES = ("ground_truth", "vlm")
LIBERO_SPATIAL_TASKS = tuple(range(10))
# Per suite: its task ids, its objects' ontology, and the perturbation files it understands (None: any).
SUITES = {
    "libero_spatial": {"tasks": LIBERO_SPATIAL_TASKS, "ontology": "libero_spatial", "perturbations": None},
    "so101_twin": {"tasks": tuple(range(5)), "ontology": "so101_tabletop", "perturbations": ("none",)},
}


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
    view: str = "agentview"
    context_style: str = "reference"  # reference | compact | json
    render_profile: str = "reference"  # reference (what learned policies were trained on) | fast
    image_size: int = 256
    max_steps: int | None = None  # None: the task suite's limit (LIBERO-Spatial: 280, so101_twin: 300)
    workers: int = 1
    output_dir: str = "outputs/eval"
    video: bool = False  # an MP4 per episode (cameras + the live graph) under output_dir/videos
    render_images: bool | None = None  # None: only when a learned policy, the VLM or the video needs images

    def __post_init__(self):
        bad = [m for m in self.modes if m not in MODES]
        if bad:
            raise ValueError(f"unknown mode(s) {bad}; choose from {list(MODES)}")
        if not self.modes:
            raise ValueError("modes is empty")
        if self.suite not in SUITES:
            raise ValueError(f"unknown suite {self.suite!r}; choose from {list(SUITES)}")
        suite = SUITES[self.suite]
        bad = [t for t in self.tasks if t not in suite["tasks"]]
        if bad:
            raise ValueError(f"unknown task id(s) {bad}; {self.suite} has tasks 0..{len(suite['tasks']) - 1}")
        if suite["perturbations"] is not None and self.perturbations not in suite["perturbations"]:
            raise ValueError(f"perturbations {self.perturbations!r} are not supported by the {self.suite} suite; "
                             f"it supports {list(suite['perturbations'])}")
        if self.graph_source not in GRAPH_SOURCES:
            raise ValueError(f"unknown graph_source {self.graph_source!r}; choose from {list(GRAPH_SOURCES)}")
        if self.graph_source == "vlm":
            if not self.vlm_client:
                raise ValueError("graph_source=vlm needs vlm_client (a config/vlm/clients name or YAML path)")
            boxed = [m for m in self.modes if "bounding_boxes" in m]
            if boxed:
                raise ValueError(f"modes {boxed} need boxes, which a VLM graph source does not give")
        if self.episodes < 1 or self.workers < 1:
            raise ValueError("episodes and workers must be >= 1")
        if not self.policies:
            raise ValueError("policies is empty")

    @property
    def ontology(self) -> str:
        return SUITES[self.suite]["ontology"]

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed_offset, self.seed_offset + self.episodes))
