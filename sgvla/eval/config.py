"""The evaluation plan: which suite, policies, tasks, perturbations, context modes, graph source and seeds.

Loaded from `config/eval/*.yaml` (see `sgvla.core.config`), overridable from the command line with
`key=value` (dotted keys reach options: `suite.render_profile=fast`). Every (policy, task, perturbation,
mode, seed) is one episode; all modes share the same seeds and perturbations, so std-vs-sg comparisons
are matched pairs. Suites, policies, graph sources and context modes are registered choices
(`sgvla.plugins` imports them all); each takes its own options:

    suite: {type: libero_spatial, render_profile: fast, image_size: 128}
    policies: [{type: prompt_grounded}, {type: smolvla, path: lerobot/smolvla_libero}]
    graph_source: {type: vlm, client: qwen2_5_vl_7b}
    modes: [standard, scene_graph]

Every enumerated or bounded setting is checked when the config is built, with the valid values in
the message, so a typo stops the run before the first episode; nothing is silently replaced
(`max_steps: null` means the suite's limit, `max_steps: 0` is an error).
"""

import dataclasses
import importlib
import re
import sys
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from sgvla.core.context import ContextMode
from sgvla.core.graph_source import GraphSourceConfig, GroundTruthConfig
from sgvla.eval.executor import ExecutorConfig, LocalExecutor
from sgvla.eval.suite import SuiteConfig
from sgvla.policies.registry import PolicyConfig
from sgvla.scene_graph.serialize import STYLES


def default_suite() -> SuiteConfig:
    """The suite of a plan that names none (its cameras and ontology are also the sim nodes' defaults)."""
    return SuiteConfig.choice("libero_spatial")()


def _default_policies() -> list[PolicyConfig]:
    return [PolicyConfig.choice("prompt_grounded")()]


@dataclass
class PolicyServerConfig:
    """Which policies one batched policy server hosts for all workers (sgvla.policies.serving), and how it batches.

    serve: `auto` hosts the learned policies whenever episodes run in more than one worker (one copy of their
    weights, one forward pass for the steps of concurrent episodes); `learned` does so even with one worker; `all`
    hosts the scripted policies too; `none` gives every worker its own copy of every policy."""

    # auto: the learned policies when episodes run in more than one worker; learned: always; all: scripted too; none
    serve: Literal["auto", "learned", "all", "none"] = "auto"
    max_batch: int = 8  # most episode steps in one forward pass
    # How long a batch waits for more steps after its first (it goes at once when every open episode's step is in).
    # 30 ms: on this project's 2-core reference machine (benchmarks/bench_scale.py) 5 ms never let two workers'
    # steps meet (mean batch 1.00; 4 workers 1.84) while 30 ms gave 1.90 and 3.02, and 1.90x / 2.47x the episodes
    # per hour of per-worker copies instead of 1.57x / 1.88x.
    max_wait_ms: float = 30.0

    def __post_init__(self) -> None:
        if self.max_batch < 1:
            raise ValueError(f"policy_server.max_batch must be >= 1, got {self.max_batch}")
        if not 0 <= self.max_wait_ms <= 10_000:
            raise ValueError(f"policy_server.max_wait_ms must be within [0, 10000], got {self.max_wait_ms}")


_SHARD = re.compile(r"(\d+)/(\d+)")


def parse_shard(text: str) -> tuple[int, int]:
    """(i, N) of ``"i/N"``: the i-th of N shards, counted from 0."""
    match = _SHARD.fullmatch(str(text))
    index, count = (int(match[1]), int(match[2])) if match else (-1, 0)
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard {text!r} is not a part of the plan: write shard=i/N with whole numbers, N >= 1 "
                         "shards and 0 <= i < N (counted from 0), e.g. shard=1/4 for the second of 4 shards "
                         "(0/4 .. 3/4); 0/1 is the whole plan")
    return index, count


def upgrade_stored(data: dict) -> dict:
    """A plan as stored (`config.yaml`) before the executor carried its options: its top-level `ray` settings go
    under `executor` when it ran on Ray, and away otherwise (they were unused), so that its folder still reads."""
    data = dict(data)
    ray = data.pop("ray", None)
    if isinstance(ray, dict) and data.get("executor") == "ray":
        data["executor"] = {"type": "ray", **ray}
    return data


def _duplicates(items: list) -> list:
    return sorted({x for x in items if items.count(x) > 1}, key=str)


@dataclass
class EvalConfig:
    name: str = "eval"  # the run's name in its tables and plots
    suite: SuiteConfig = field(default_factory=default_suite)  # the simulator and tasks: {type: libero_spatial}
    # the policies under test, each {type: ..., ...}: prompt_grounded, expert, act, smolvla, pi0, pi05, ...
    policies: list[PolicyConfig] = field(default_factory=_default_policies)
    tasks: list[int] | None = None  # None: every task of the suite
    perturbations: str = ""  # a perturbation set of the suite (config/perturbations/); "": the suite's default set
    modes: list[str] = field(default_factory=lambda: ["standard", "scene_graph"])  # registered context modes
    episodes: int = 10  # seeds seed_offset .. seed_offset + episodes - 1
    seed_offset: int = 0  # the first seed
    # Two-sided significance level of the report's sequential test (std vs each other mode, after every matched
    # pair): fixed with the plan, since choosing it while looking at results would void the test's error rate.
    alpha: float = 0.05
    # where the live scene graph comes from: {type: ground_truth}, {type: vlm, client: ...}, {type: fiducial}
    graph_source: GraphSourceConfig = field(default_factory=GroundTruthConfig)
    view: str = ""  # the camera whose graph the prompt shows; "": the suite's first view (its agent view)
    context_style: Literal[STYLES] = "reference"  # how the graph is written into the prompt
    max_steps: int | None = None  # None: the suite's limit (LIBERO-Spatial: 280, so101_twin: 300)
    workers: int = 1  # simulator processes running episodes side by side
    output_dir: str = "outputs/eval"  # the run folder (records, tables, plots, report); --out overrides it
    video: bool = False  # an MP4 per episode (cameras + the live graph) under output_dir/videos
    render_images: bool | None = None  # None: only when a learned policy, the graph source or the video needs images
    # What an episode whose infrastructure failed (graph source, simulator, worker process) does to the run:
    # retry_later records it as an infrastructure failure and goes on (the next run of the plan retries it);
    # stop records it and ends the run.
    on_infra_failure: Literal["retry_later", "stop"] = "retry_later"
    # Episode order: matched (every mode of a (task, seed) back to back, in the plan's mode order) or
    # counterbalanced (the same blocks, the modes' order in each block seeded ABBA: sgvla.eval.order), which a
    # run on a physical arm wants so that drift over the day does not favour one mode.
    order: Literal["matched", "counterbalanced"] = "matched"
    # Which part of the plan this run holds, i/N (counted from 0): whole (task, seed) blocks, every mode and policy
    # of each, dealt round-robin over N shards in plan order, so that the N jobs of a batch scheduler (a SLURM
    # array) run one plan in N folders and `sgvla merge` joins them into one table (sgvla.eval.shards). Text, not a
    # number: 0/1 is the whole plan.
    shard: str = "0/1"
    # Where episodes run, a registered choice with its options (sgvla.eval.executor): local (this machine: `workers`
    # processes) or {type: ray, address: HEAD:6379, ...} (simulator workers as actors of a Ray cluster). Either way
    # one policy server hosts the learned policies (policy_server).
    executor: ExecutorConfig = field(default_factory=LocalExecutor)
    policy_server: PolicyServerConfig = field(default_factory=PolicyServerConfig)  # one batched server for all workers

    # Keys a plan no longer takes, and where they went (from_mapping says so instead of "unknown key").
    MOVED: ClassVar[dict[str, str]] = {
        "ray": "the Ray settings moved under executor: `executor: {type: ray, address: HEAD:6379, ...}` "
               "(on the command line: executor=ray executor.address=HEAD:6379)"}

    def __getstate__(self) -> dict:
        """The plan as pickled for a worker process or a Ray actor, with the modules that register its context modes:
        modes travel as names (the suite, policies and graph source as objects, whose classes unpickling imports), and
        the process that receives the plan must know them."""
        return {**self.__dict__, "_mode_modules": sorted({ContextMode.choice(m).__module__ for m in self.modes})}

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        for module in state.pop("_mode_modules", ()):
            if module not in sys.modules:
                importlib.import_module(module)
        self.__dict__.update(state)

    def __post_init__(self):
        # The suite's facts fill what the plan leaves out: a plan names only what it changes.
        self.tasks = list(self.suite.tasks) if self.tasks is None else self.tasks
        self.perturbations = self.perturbations or self.suite.default_perturbations
        self.view = self.view or self.suite.views[0]
        for key in ("modes", "tasks", "policies"):
            if not getattr(self, key):
                raise ValueError(f"{key} is empty")
        for mode in self.modes:
            ContextMode.choice(mode)
        bad = [t for t in self.tasks if t not in self.suite.tasks]
        if bad:
            raise ValueError(f"unknown task id(s) {bad}; {self.suite.type} has tasks {list(self.suite.tasks)}")
        for key in ("modes", "tasks"):
            if _duplicates(getattr(self, key)):
                raise ValueError(f"{key} lists {_duplicates(getattr(self, key))} more than once")
        names = [p.display_name for p in self.policies]
        if _duplicates(names):
            raise ValueError(f"two policies share a name in {names}; give them distinct `name`s")
        self.suite.check_perturbations(self.perturbations)
        if self.view not in self.suite.views:
            raise ValueError(f"unknown view {self.view!r}; the {self.suite.type} suite's cameras are "
                             f"{list(self.suite.views)}")
        if not self.graph_source.gives_boxes:
            boxed = [m for m in self.modes if ContextMode.choice(m).needs_boxes]
            if boxed:
                raise ValueError(f"modes {boxed} need boxes, which the {self.graph_source.type} graph source does "
                                 "not give")
        if self.graph_source.reads_images and not self.suite.image_graph_sources:
            raise ValueError(f"the {self.suite.type} suite cannot give the {self.graph_source.type} graph source "
                             "the images it reads yet; use graph_source=ground_truth")
        source, suite = self.graph_source, self.suite
        if source.perceived and not suite.perceives:
            raise ValueError(f"graph_source {source.type} gives the graph of the objects as perceived from their "
                             f"fiducial markers, which the {suite.type} suite does not perceive as configured"
                             f"{suite.setup_hint() or ' (its objects carry no markers)'}")
        if source.reads_simulator and suite.perceives:
            raise ValueError(f"the {suite.type} suite perceives its objects (perception: true), so its graphs are the "
                             f"perceived ones, not the simulator's {source.type}; use graph_source=fiducial")
        if not self.suite.graph_modes:
            graphed = [m for m in self.modes if ContextMode.choice(m).uses_graph]
            if graphed:
                raise ValueError(f"modes {graphed} read a live scene graph, which the {self.suite.type} suite has no "
                                 f"source of as configured{self.suite.setup_hint()}; use modes=[standard]")
        if not self.suite.knows_objects:
            scened = [p.type for p in self.policies if p.needs_scene]
            if scened:
                raise ValueError(f"policies {scened} read the scene (object positions), which the {self.suite.type} "
                                 f"suite does not know as configured{self.suite.setup_hint()}; use a policy that "
                                 "reads joint states (hold)")
        learned = [p.type for p in self.policies if p.learned]
        if learned and not self.suite.learned_policies:
            raise ValueError(f"the {self.suite.type} suite runs scripted policies only; not supported: {learned}")
        bounds = {"episodes": (self.episodes, 1), "workers": (self.workers, 1), "seed_offset": (self.seed_offset, 0)}
        if self.max_steps is not None:
            bounds["max_steps"] = (self.max_steps, 1)
        for key, (value, low) in bounds.items():
            if value < low:
                hint = " (leave it out, or null, for the suite's limit)" if key == "max_steps" else ""
                raise ValueError(f"{key} must be >= {low}, got {value}{hint}")
        for p in self.policies:  # a policy's own part of the plan: at most so many of its tasks and seeds
            for key in ("max_tasks", "max_episodes"):
                if getattr(p, key) is not None and getattr(p, key) < 1:
                    raise ValueError(f"policy {p.display_name}: {key} must be >= 1, got {getattr(p, key)} (leave it "
                                     "out, or null, for all of the plan's)")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be within (0, 1), got {self.alpha} (the significance level, e.g. 0.05)")
        if not self.output_dir:
            raise ValueError("output_dir is empty")
        self.shard_index_count  # refuses anything but i/N with 0 <= i < N, naming the setting and an example
        if self.render_images is False and self.images_needed:
            raise ValueError("render_images=false, but a learned policy, the graph source or video needs images")

    @property
    def shard_index_count(self) -> tuple[int, int]:
        """(i, N) of `shard`: this run holds the i-th of N parts of the plan."""

        return parse_shard(self.shard)

    @property
    def images_needed(self) -> bool:
        """A learned policy, the graph source or the video reads camera images."""
        return self.video or self.graph_source.reads_images or any(p.learned for p in self.policies)

    @property
    def needs_images(self) -> bool:
        """Whether episodes render camera images (`render_images`, by default when they are needed)."""
        return self.images_needed if self.render_images is None else self.render_images

    @property
    def ontology(self) -> str:
        return self.suite.ontology

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed_offset, self.seed_offset + self.episodes))


def _default_text(value) -> str:
    """A default as a plan would write it: registered choices by their type, null for None."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(_default_text(v) for v in value) + "]"
    if hasattr(value, "type") and dataclasses.is_dataclass(value):
        return f"{{type: {value.type}}}"
    if isinstance(value, bool):
        return str(value).lower()
    return '""' if value == "" else str(value)


def plan_keys(cls=None, prefix: str = "") -> list[tuple[str, str, str]]:
    """(key, default, meaning) of every key of a plan, the options of its nested settings as dotted keys, from the
    plan's own declarations (`sgvla.core.field_docs`): `sgvla eval --help` lists them, so the list cannot drift."""
    from sgvla.core.field_docs import field_docs

    cls = cls or EvalConfig
    docs, keys = field_docs(cls), []
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        nested = type(default) is PolicyServerConfig
        keys.append((prefix + f.name, "" if nested else _default_text(default), docs.get(f.name, "")))
        if nested:
            keys.extend(plan_keys(type(default), f"{prefix}{f.name}."))
        if isinstance(default, ExecutorConfig):  # each executor's own options, named with it
            for name, choice in sorted(ExecutorConfig.choices().items()):
                keys.extend((key, value, f"(executor: {name}) {meaning}")
                            for key, value, meaning in plan_keys(choice, f"{prefix}{f.name}."))
    return keys
