"""The episode engine: one episode of graph-injected evaluation, stepped from outside.

Whoever owns the robot or simulator drives it (``sgvla eval`` in process; the ``vla_policy`` node over topics),
so both run the same code for the same seeds::

    engine = Episode(key, policy, mode, source, ontology, view=..., max_steps=..., info=...)
    engine.start(task, step)                 # reference graph, first context, policy.reset
    while not engine.done:
        action = engine.act(step)            # live context (when the mode reads the graph), policy.act;
        if action is None:                   # None: the policy gave up (PolicyGaveUp), the episode is over
            break
        step, success, done = <apply action>
        engine.observe(success, done, step.scene)  # counts the step; success, the backend's end or the limit end it
    record = engine.record(...)              # one typed EpisodeRecord

Progress (`sgvla.core.progress`): given the suite's stage spec (`stages`) and the task's goal (`info["goal"]`), the
engine tracks the stages the episode reaches from the scene of the first step (`start`) and of every step after an
action (`observe`), and the record holds `progress`, `stages` and `failure_class`. Both drivers pass the same scenes
at the same steps, so their records agree; where no scene comes (a physical arm without perception), progress is
unknown (None) and a failure that was not a give-up is of class ``unknown``.

A component that cannot do its job (a graph source without a graph, a simulator that crashed, a node that is
gone) raises :class:`InfrastructureFailure`; :meth:`Episode.record_failure` turns that into a record that is
marked as such, never into a policy's failure (runners exclude them from success rates and retry them).
A policy that cannot act on what it is given raises :class:`PolicyGaveUp`: that ends the episode as the
policy's failure, with the reason in ``failure_reason`` (a result, counted).

An episode in which the policy produced no action (it gave up before its first, or the episode ended before one)
says nothing of the policy: its record is an infrastructure failure with that cause (`Episode.no_action`), rerun by
the next run, whichever driver ran it. On the arm under load a give-up at the first step on a perception caught
mid-change was otherwise recorded as the policy's failure with 0 steps.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from sgvla.core.action_digest import ActionDigest
from sgvla.core.context import Context, ContextInputs, ContextMode
from sgvla.core.mid_episode import STEPS_KEY, TRIGGERS_KEY, MidEpisodeWatch, triggers_of
from sgvla.core.progress import PickPlaceSpec, PickPlaceStages, summarize
from sgvla.core.protocols import GraphSource, Policy, PolicyGaveUp, PromptBudget, Step, StepInput
from sgvla.scene_graph import Ontology, ViewGraph


class InfrastructureFailure(RuntimeError):
    """The machinery failed (graph source, simulator, node, worker), not the policy: the episode has no result."""

    kind = "infrastructure"  # how results files classify it (sgvla.eval.results.InfraFailures)


class EpisodeKey(NamedTuple):
    """What identifies an episode in a plan and in a results file: each is run (and recorded) once."""

    policy: str
    task_id: int
    perturbation: str
    mode: str
    seed: int

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> EpisodeKey:
        return cls(record["policy"], int(record["task_id"]), record["perturbation"], record["mode"],
                   int(record["seed"]))


@dataclass
class EpisodeRecord:
    """One finished episode, as results files store it (one JSON object per line) and reports read it.

    `infra_failure` is set (with the reason) when the machinery failed: such a record is no result and is not
    counted; the episode is run again. `decision` holds what the policy decided (e.g. its grounding) and is stored
    flat as `decision_<key>`, `control` what a control mode showed (`control_<key>`); `extra` holds what a runner
    or backend adds (perturbation, render profile, ...).

    `progress`, `stages`, `failure_class`: see `sgvla.core.progress` (progress None: unknown; failure_class "" on
    success, None in records written before it existed or without a result)."""

    policy: str
    task_id: int
    perturbation: str
    mode: str
    seed: int
    success: bool
    steps: int
    max_steps: int
    wall_time_s: float
    task: str = ""
    prompt: str = ""
    view: str = ""
    graph_source: str = ""
    graph_triplets: int = 0
    triplets_in_prompt: int = 0
    visible_objects: list[str] = field(default_factory=list)
    context_ms_per_step: float = 0.0
    prompt_tokens: int | None = None
    prompt_budget: int | None = None
    triplets_kept: int | None = None
    prompt_truncated: bool = False
    failure_reason: str = ""
    infra_failure: str = ""
    video: str = ""
    source_stats: dict[str, Any] = field(default_factory=dict)
    decision: dict[str, Any] = field(default_factory=dict)
    control: dict[str, Any] = field(default_factory=dict)  # what a control mode showed (first step), `control_<key>`
    extra: dict[str, Any] = field(default_factory=dict)
    progress: float | None = None  # fraction of the stages reached, in [0, 1]; None: unknown
    stages: dict[str, int] = field(default_factory=dict)  # stage -> the first step it was reached (reached ones)
    failure_class: str | None = None  # "" on success; None: not recorded

    @property
    def key(self) -> EpisodeKey:
        return EpisodeKey(self.policy, self.task_id, self.perturbation, self.mode, self.seed)

    @classmethod
    def not_started(cls, key: EpisodeKey, error: BaseException, max_steps: int, **fields: Any) -> EpisodeRecord:
        """The record of an episode whose machinery failed before it had an engine (a reset, a bad spec): no result
        (see InfrastructureFailure); `fields` adds what is known (view, graph_source, extra). An episode that
        started records its failure with `Episode.record_failure`."""
        return cls(*key, success=False, steps=0, max_steps=int(max_steps), wall_time_s=0.0,
                   infra_failure=f"{type(error).__name__}: {error}", **fields)

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("source_stats", "decision", "control", "extra")}
        data.update(self.source_stats)
        data.update({f"decision_{k}": _plain(v) for k, v in self.decision.items()})
        data.update({f"control_{k}": _plain(v) for k, v in self.control.items()})
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EpisodeRecord:
        names = {f.name for f in dataclasses.fields(cls)} - {"source_stats", "decision", "control", "extra"}
        known = {k: v for k, v in data.items() if k in names}
        decision = {k[len("decision_"):]: v for k, v in data.items() if k.startswith("decision_")}
        control = {k[len("control_"):]: v for k, v in data.items() if k.startswith("control_")}
        rest = {k: v for k, v in data.items()
                if k not in names and not k.startswith("decision_") and not k.startswith("control_")}
        stats = {k: rest.pop(k) for k in list(rest) if k.startswith("vlm_")}
        return cls(**known, source_stats=stats, decision=decision, control=control, extra=rest)


def _plain(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return x


class Episode:
    """One episode of (policy, task, perturbation, mode, seed); see the module docstring."""

    def __init__(self, key: EpisodeKey, policy: Policy, mode: ContextMode, source: GraphSource, ontology: Ontology,
                 *, view: str, max_steps: int, style: str = "reference", info: Mapping[str, Any] | None = None,
                 stages: PickPlaceSpec | None = None):
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.key, self.policy, self.mode, self.source = key, policy, mode, source
        self.ontology, self.view, self.style, self.max_steps = ontology, view, style, max_steps
        self.info = dict(info or {})
        self.stages = stages  # the suite's stage spec; None: progress unknown
        self.tracker: PickPlaceStages | None = None  # made at start, for the goal in `info`
        # Mid-episode changes (sgvla.core.mid_episode): the steps their triggers fired, read from the same scenes as
        # the backend that applies them; made at start when `info` names triggers.
        self.mid_episode: MidEpisodeWatch | None = None
        self.task = ""
        self.context: Context | None = None
        self.start_prompt = ""
        self.budget: PromptBudget | None = None
        self.reference: ViewGraph | None = None
        self.steps = 0
        self.success = False
        self.done = False
        self.gave_up = ""  # the policy's reason, when it raised PolicyGaveUp
        self.context_s = 0.0
        self._acted = -1  # the step whose context was last built (refresh)
        self._start_control: dict[str, Any] = {}
        self._tokens: dict[str, int | None] = {}  # text -> the policy's token count (controls match lengths)
        # Every action handed out (`act`) or, where the policy runs elsewhere, stepped (`took`): the record's
        # `action_digest` (sgvla.core.action_digest), in `extra` so every transport of records carries it.
        self.actions = ActionDigest()
        self._started = time.perf_counter()

    def _context(self, step: Step) -> Context:
        view_graph = None
        if self.mode.uses_graph:
            view_graph = self.source.view_graph(self.view, step.observation, step.scene, self.task)
        inputs = ContextInputs(seed=self.key.seed, count_tokens=self._count_tokens)
        return self.mode.context(self.task, view_graph, self.view, self.ontology, self.style, inputs)

    def _count_tokens(self, text: str) -> int | None:
        """The policy's token count of `text` (its tokenizer, through `prompt_budget`); None when it has none."""
        if text not in self._tokens:
            budget = self.policy.prompt_budget(text)
            self._tokens[text] = None if budget is None else budget.tokens
        return self._tokens[text]

    def start(self, task: str, step: Step, reference: ViewGraph | None = None) -> None:
        """Begin: the reference graph of the first frame (for the record), the first context, the policy's reset.
        `reference` is the ground-truth view graph where one is known (its size and visible objects are recorded;
        a VLM source's graph is not a reference). Progress is tracked from here when the engine has a stage spec
        and `info` the task's goal, (target, place)."""
        self.task, self.reference = task, reference
        goal = self.info.get("goal")
        self.tracker = self.stages.tracker(*goal) if self.stages is not None and goal else None
        triggers = triggers_of(self.info.get(TRIGGERS_KEY, ""))
        self.mid_episode = MidEpisodeWatch(triggers, self.stages, goal) if triggers else None
        self.mode.reset()  # a mode that keeps state across steps (frozen_graph) starts afresh
        self._track(step.scene)
        self.source.reset()
        self.context = self._context(step)
        self.policy.reset(self.context.prompt, seed=self.key.seed)
        self.budget = self.policy.prompt_budget(self.context.prompt)
        self.start_prompt = self.context.prompt
        self._start_control = dict(self.context.control)

    def refresh(self, step: Step) -> Context:
        """The context of the current step: rebuilt from `step`'s live graph after the first step (once a step) when
        the mode reads the graph. `act` calls it; a driver whose policy is stepped elsewhere (LeRobot's evaluation
        loop, `lerobot_env_sgvla`) calls it after each `observe` to hand the policy the prompt the engine would."""
        if self.context is None:
            raise RuntimeError("Episode.start() comes first")
        if self.done:
            raise RuntimeError(f"episode {self.key} is over")
        if self.steps and self.mode.uses_graph and self._acted != self.steps:
            t = time.perf_counter()
            self.context = self._context(step)
            self.context_s += time.perf_counter() - t
        self._acted = self.steps
        return self.context

    def act(self, step: Step) -> np.ndarray | None:
        """The policy's action for the current step (the context rebuilt from the live graph after the first);
        None when the policy gave up (PolicyGaveUp): the episode is then over, a failure with the policy's reason."""
        self.refresh(step)
        try:
            action = self.policy.act(StepInput(step.observation.raw, self.context.prompt, step.scene, self.info))
        except PolicyGaveUp as e:
            self.gave_up, self.success, self.done = str(e) or type(e).__name__, False, True
            return None
        action = np.asarray(action, dtype=np.float64).reshape(-1)
        self.took(action)
        return action

    def took(self, action: np.ndarray) -> None:
        """Count `action` into the episode's action digest; `act` does it for the actions it hands out, a driver
        whose policy is stepped elsewhere (`lerobot_env_sgvla`) for each action it steps, in the backend's units."""
        self.actions.add(action)

    def observe(self, success: bool, done: bool, scene: Any = None) -> bool:
        """The outcome of the step just taken and the scene after it (None: none known); True when the episode is
        over (success, done, or the limit)."""
        self.steps += 1
        self.success = bool(success)
        self.done = bool(success or done or self.steps >= self.max_steps)
        self._track(scene)
        return self.done

    def _track(self, scene: Any) -> None:
        if self.tracker is not None and scene is not None:
            self.tracker.observe(self.steps, scene)
        if self.mid_episode is not None:
            self.mid_episode.observe(self.steps, scene)

    def record(self, **extra: Any) -> EpisodeRecord:
        """The finished episode's record; `extra` adds runner or backend facts (perturbation_applied, ...)."""
        ref, budget = self.reference, self.budget
        record = EpisodeRecord(
            *self.key, success=self.success, steps=self.steps, max_steps=self.max_steps,
            wall_time_s=round(time.perf_counter() - self._started, 3), task=self.task, prompt=self.start_prompt,
            view=self.view, graph_source=self.source.name, graph_triplets=len(ref.graph) if ref else 0,
            triplets_in_prompt=self.context.triplets_in_prompt if self.context else 0,
            visible_objects=sorted(ref.boxes) if ref else [],
            context_ms_per_step=round(1000 * self.context_s / max(self.steps - 1, 1), 4),
            prompt_tokens=budget.tokens if budget else None, prompt_budget=budget.budget if budget else None,
            triplets_kept=budget.triplets_kept if budget else None,
            prompt_truncated=budget.truncated if budget else False,
            failure_reason=self._failure_reason(),
            source_stats=self.source.stats(), decision=self.policy.decision(), control=self._start_control,
            extra={"action_digest": self.actions.hexdigest(), **self._mid_episode_facts(), **extra},
            **dataclasses.asdict(summarize(self.tracker, self.success, self.steps, self.gave_up)))
        if self.no_action():
            _no_result(record, InfrastructureFailure(self.no_action()))
        return record

    def _mid_episode_facts(self) -> dict[str, Any]:
        """The triggers and the step each fired at (None: never), where the episode had mid-episode changes."""
        w = self.mid_episode
        return {} if w is None else {TRIGGERS_KEY: self.info[TRIGGERS_KEY], STEPS_KEY: list(w.fired)}

    def no_action(self) -> str:
        """Why the policy produced no action in this episode, "" when it produced one (see the module docstring)."""
        if self.actions.count:
            return ""
        if self.gave_up:
            return f"the policy produced no action: it gave up before its first ({self.gave_up})"
        return f"the policy produced no action: the episode ended after {self.steps} steps, before its first"

    def _failure_reason(self) -> str:
        if self.success:
            return ""
        return f"policy gave up: {self.gave_up}" if self.gave_up else "step limit reached"

    def record_failure(self, error: BaseException, **extra: Any) -> EpisodeRecord:
        """The record of an episode the machinery failed: no result (see InfrastructureFailure)."""
        return _no_result(self.record(**extra), error)


def _no_result(record: EpisodeRecord, error: BaseException) -> EpisodeRecord:
    """``record`` marked as no result, for ``error`` (see InfrastructureFailure)."""
    record.success = False
    record.failure_reason = ""
    record.infra_failure = f"{type(error).__name__}: {error}"
    record.progress, record.stages, record.failure_class = None, {}, None
    return record
