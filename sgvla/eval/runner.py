"""Run an evaluation plan: every (policy, task, perturbation, mode, seed) once, resumably.

Episodes already in the run's `episodes.jsonl` are skipped, so rerunning a killed command finishes
the plan with every episode recorded exactly once. With `workers > 1` episodes run in separate
processes (each keeps its own simulator and policies); records are written by this process only,
one line per finished episode.
"""

import atexit
import dataclasses
import logging
import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import yaml
from tqdm import tqdm

from sgvla.eval.config import EvalConfig
from sgvla.eval.loop import Episode, EpisodeRunner
from sgvla.eval.results import EpisodeKey, ResultsFile
from sgvla.policies import scripted  # noqa: F401  (registers the scripted policies)
from sgvla.policies.registry import PolicySpec, make_policy_from_spec
from sgvla.scene_graph import load_ontology

log = logging.getLogger(__name__)
LEARNED = {"act", "smolvla", "pi0", "pi05", "lerobot"}


def policy_name(spec: PolicySpec) -> str:
    return spec.name or (spec.type if not spec.path else f"{spec.type}:{Path(spec.path).name}")


def plan(cfg: EvalConfig) -> list[Episode]:
    """Matched order: for each task and seed, every mode and policy back to back."""
    return [Episode(policy_name(p), task, cfg.perturbations, mode, seed)
            for task in cfg.tasks for seed in cfg.seeds for mode in cfg.modes for p in cfg.policies]


class Worker:
    """Simulators and policies of one process, reused across the episodes it runs."""

    def __init__(self, cfg: EvalConfig):
        self.cfg = cfg
        self.ontology = load_ontology(cfg.ontology)
        self.specs = {policy_name(p): p for p in cfg.policies}
        needed = cfg.video or cfg.graph_source == "vlm" or any(p.type in LEARNED for p in cfg.policies)
        self.needs_images = needed if cfg.render_images is None else cfg.render_images
        if needed and not self.needs_images:
            raise ValueError("render_images=false, but a learned policy, the VLM graph source or video needs images")
        self.vlm = self._make_vlm() if cfg.graph_source == "vlm" else None
        self._runner: EpisodeRunner | None = None  # one task's simulator at a time
        self._runner_task: int | None = None
        self._policies: dict = {}

    def runner(self, task_id: int) -> EpisodeRunner:
        if self._runner is None or self._runner_task != task_id:
            self.close_runner()
            self._runner = self._make_runner(task_id)
            self._runner_task = task_id
        return self._runner

    def close_runner(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None

    def _make_backend(self, task_id: int):
        if self.cfg.suite == "so101_twin":
            from sgvla.so101.twin.backend import TwinBackend

            return TwinBackend(task_id, image_size=self.cfg.image_size, render_images=self.needs_images)
        from sgvla.libero.env import make_backend

        return make_backend(task_id, render_profile=self.cfg.render_profile, perturbation=self.cfg.perturbations,
                            image_size=self.cfg.image_size, render_images=self.needs_images)

    def _make_runner(self, task_id: int) -> EpisodeRunner:
        backend = self._make_backend(task_id)
        source = None
        if self.vlm is not None:
            from sgvla.eval.graph_source import VLMSource

            source = VLMSource(self.vlm, self.cfg.vlm_rate_hz)
        video_dir = Path(self.cfg.output_dir) / "videos" if self.cfg.video else None
        return EpisodeRunner(backend, self.ontology, self.cfg.view, self.cfg.context_style, self.cfg.max_steps,
                             video_dir=video_dir, graph_source=source)

    def _make_vlm(self):
        from sgvla.vlm.config import load_client_config, make_vlm
        from sgvla.vlm.prompts import load_prompt

        return make_vlm(load_client_config(self.cfg.vlm_client), load_prompt(), self.ontology)

    def policy(self, name: str):
        if name not in self._policies:
            env_cfg = None
            if self.specs[name].type in LEARNED:
                from sgvla.policies.lerobot_vla import libero_env_config

                env_cfg = libero_env_config(observation_height=self.cfg.image_size,
                                            observation_width=self.cfg.image_size)
            self._policies[name] = make_policy_from_spec(self.specs[name], ontology=self.ontology, env_cfg=env_cfg)
        return self._policies[name]

    def run(self, episode: Episode) -> dict:
        runner = self.runner(episode.task_id)
        record = runner.run(episode, self.policy(episode.policy))
        perturbation = getattr(runner.backend, "perturbation", None)  # the twin has none
        record["perturbation_applied"] = describe(perturbation) if perturbation is not None else "none"
        record["render_profile"] = self.cfg.render_profile
        return record


def describe(p) -> str:
    """A one-line summary of a task's perturbation for the episode record."""
    parts = [f"remove {','.join(p.remove)}"] if p.remove else []
    parts += [f"prompt '{p.prompt}'"] if p.prompt else []
    parts += [f"cameras {','.join(p.cameras)}"] if p.cameras else []
    parts += [f"{type(op).__name__.lower()} {op.a}<->{op.b}" if hasattr(op, "b") else f"move {op.object} by {list(op.by)}"
              for op in p.poses]
    return "; ".join(parts) or "none"


_worker: Worker | None = None


def _init_worker(cfg: EvalConfig) -> None:
    global _worker
    os.environ.setdefault("MUJOCO_GL", "egl")
    _worker = Worker(cfg)
    atexit.register(_worker.close_runner)


def _run_in_worker(episode: Episode) -> dict:
    return _worker.run(episode)


def validate(cfg: EvalConfig) -> None:
    """Fail before the first episode on what the config loader cannot see: policy types, perturbation files."""
    from sgvla.policies.registry import POLICY_REGISTRY
    from sgvla.libero.perturbations import load_perturbations

    for spec in cfg.policies:
        if spec.type not in POLICY_REGISTRY:
            raise ValueError(f"unknown policy type {spec.type!r}; known types: {', '.join(sorted(POLICY_REGISTRY))}")
    names = [policy_name(p) for p in cfg.policies]
    if len(set(names)) != len(names):
        raise ValueError(f"two policies share a name in {names}; give them distinct `name`s")
    if cfg.suite == "so101_twin":
        learned = [p.type for p in cfg.policies if p.type in LEARNED]
        if learned or cfg.graph_source == "vlm":
            raise ValueError(f"the so101_twin suite runs scripted policies on ground-truth graphs; "
                             f"not supported: {learned or ['graph_source=vlm']}")
        return
    load_perturbations(cfg.perturbations)
    if cfg.vlm_client:
        from sgvla.vlm.config import load_client_config

        load_client_config(cfg.vlm_client)


def run_plan(cfg: EvalConfig, progress: bool = True) -> tuple[Path, int]:
    """Run what is missing of the plan; returns (results path, number of failed episodes)."""
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(dataclasses.asdict(cfg), sort_keys=False))
    results = ResultsFile(out / "episodes.jsonl")
    todo = [e for e in plan(cfg) if EpisodeKey(*dataclasses.astuple(e)) not in results]
    total = len(plan(cfg))
    bar = tqdm(total=total, initial=total - len(todo), desc=cfg.name, unit="ep", disable=not progress)
    wins: Counter = Counter()
    failed = 0

    def record(rec: dict) -> None:
        results.append(rec)
        wins[rec["mode"]] += rec["success"]
        bar.set_postfix({m: wins[m] for m in cfg.modes})
        bar.update()

    if cfg.workers == 1:
        _init_worker(cfg)
        try:
            for episode in todo:
                try:
                    record(_run_in_worker(episode))
                except Exception:
                    failed += 1
                    log.exception("episode %s failed; it is not recorded, rerun to retry", episode)
        finally:
            _worker.close_runner()
    else:
        with ProcessPoolExecutor(cfg.workers, mp_context=get_context("spawn"), initializer=_init_worker,
                                 initargs=(cfg,)) as pool:
            futures = {pool.submit(_run_in_worker, e): e for e in todo}
            for future in as_completed(futures):
                try:
                    record(future.result())
                except Exception:
                    failed += 1
                    log.exception("episode %s failed; it is not recorded, rerun to retry", futures[future])
    bar.close()
    return results.path, failed


def run(args) -> int:
    from rich.console import Console

    from sgvla.core.config import ConfigError, load_config, parse_override
    from sgvla.eval.report import markdown_table, write_report

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    console = Console()
    try:
        overrides = dict(parse_override(o) for o in args.overrides)
        if args.workers is not None:
            overrides["workers"] = args.workers
        if args.out is not None:
            overrides["output_dir"] = args.out
        cfg = load_config(EvalConfig, args.config, overrides)
        validate(cfg)
    except (ConfigError, ValueError, FileNotFoundError) as e:
        console.print(f"[bold red]sgvla eval: {e}[/]")
        return 2
    path, failed = run_plan(cfg, progress=not args.quiet)
    records = list(ResultsFile(path).records())
    paths = write_report(path.parent, records)
    print(markdown_table(records), flush=True)
    console.print(f"records: {path}\n" + "\n".join(f"{k}: {v}" for k, v in paths.items()))
    if failed:
        console.print(f"[bold red]{failed} episode(s) failed (see the log above); rerun the same command to retry them[/]")
        return 1
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("eval", help="run a graph-injected policy evaluation (resumable)",
                       description="Run every (policy, task, perturbation, mode, seed) of a plan once; rerunning "
                                   "the same command resumes. Overrides: key=value, e.g. tasks=[0,1] episodes=5.")
    p.add_argument("--config", default="config/eval/default.yaml", help="evaluation plan (YAML)")
    p.add_argument("--workers", type=int, help="parallel episode processes")
    p.add_argument("--out", help="run directory (default: the config's output_dir)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.set_defaults(func=run)
