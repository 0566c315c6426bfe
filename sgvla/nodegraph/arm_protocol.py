"""The operator's episode protocol on the physical arm, ROS-free: what the ``arm_policy`` node runs over topics.

The hardware counterpart of vla_policy: the evaluator sends the same goals. There is no simulator to reset and
nothing judges success, so an episode is the operator's protocol (its pieces: `sgvla.so101.hardware.protocol`):

1. home: joint goals towards the suite's home pose on `joint_commands`, at most `home_step_deg` per control tick
   from where the arm is (the so101_arm node's safety layer clamps them again), until every joint is within
   `home_tolerance_deg` (not within `home_timeout_s`: an infrastructure failure);
2. the scene card on `eval/operator` (latched): task, perturbation, policy, seed; the context mode only when the
   plan is not `blind`. The operator sets the scene and publishes `start` on `eval/confirm`;
3. the episode engine (`sgvla.core.episode`, the standard prompt) steps the policy at the suite's control rate on
   the latest `joint_states` (degrees, as `sgvla record` stores them) and sends its goals on `joint_commands`,
   until the time limit or `stop` on `eval/confirm` (or a verdict, which also ends it);
4. the operator's verdict on `eval/verdict`: ``success|failure|invalid [note]``. The record (verdict, its source,
   note, the verdicts given and what became of each, home-pose error, the phases' durations) is the action's
   result; an invalid one is redone by the evaluator.

Verdicts belong to one episode, and every verdict is answered on `eval/operator` (and in the log):

- a verdict is taken only while the episode runs (after `start`) or waits for its verdict. One that arrives before
  (while the arm homes, before or after the scene card, while `start` is awaited, between episodes) is refused
  ("arrived before episode N started ... ignored") and never applied to a later episode;
- the first verdict of an episode is accepted (a verdict while the episode runs also stops it). Within
  ``verdict_window_s`` of it (the plan's suite option, default 3 s) a later verdict replaces it: the operator who sends
  the wrong word corrects it at once. The last one within the window stands, and the record is written only once
  the window has passed;
- a verdict after the window, while the record is being written, is refused naming the verdict that stands and
  the one ignored; after the record, as any verdict outside an episode.

The record keeps them all: ``verdict_history`` lists each verdict given while the episode's verdicts were open or
being recorded (outcome, note, source, seconds after the first, and ``stands``, ``replaced`` or ``refused``); the
record's verdict is the one that stands (``verdict_wait_s``: until the first verdict). With ``verdict_window_s: 0``
the first verdict stands and every later one is refused with a message. An episode a verdict stopped within its
first ``EARLY_VERDICT_S`` is flagged ``early_verdict`` (a verdict meant for another episode, most likely; the report
counts them).

Perception (the suite's ``perception: true``, `sgvla launch so101_eval perception=true`): the live graph of graph
modes is the newest ``scene_graph/<view>`` of source fiducial (boxes from ``perception/objects``), and policies that
read the scene (prompt_grounded, expert) get the scene as perceived: the objects of ``perception/objects`` with
their configured extents and the gripper frame by forward kinematics at the joint states (never a simulator's
state); they drive the suite's pick-and-place controller, whose joint goals (radians) are converted to the arm's
units. Perception older than ``perception_timeout_s`` is an infrastructure failure. The prompt goes out on ``task``
(latched) for fiducial_graphs' relation rules.

Learned policies (LeRobot checkpoints trained on SO101 data: act, smolvla, pi0, pi05, lerobot with a ``path``):
the observation is the joint states in LeRobot units and the images of the rig cameras the checkpoint's features
name (``<camera>/image_raw``, resized to the features' shapes; `sgvla.so101.learned`); chunks are computed in a
background thread while the current one plays (`So101ChunkedPolicy`), so the control loop never waits for
inference (before the first chunk the arm holds); the step's prompt (standard, or with the live graph) is the
task of the chunk asked for at that step; goals are LeRobot units, sent in radians on ``joint_commands`` through
the arm node's safety layer. ``min_inference_s`` pads each inference (a slow model, stood in for in tests).
An image older than ``image_timeout_s`` is an infrastructure failure, not the policy's.

An episode in which the policy never acted (it gave up before its first action, or a learned policy's first chunk
never came: the arm held throughout) is no result: its record is an infrastructure failure with that cause, the
operator is told and asked for no verdict, and the evaluator files it for the next run to repeat.

Rollouts: with ``rollouts`` (a dataset folder; `sgvla launch so101_eval` sets ``<output_dir>/rollouts``) every
episode that gets a verdict is saved as an episode of a LeRobot dataset (`sgvla.so101.hardware.rollouts`: state,
goal and the ``cameras``' images per control step of the run, the layout of `sgvla record`), invalid ones included
and marked in its ``sgvla_rollouts.jsonl``; the record holds ``rollout_dataset``, ``rollout_episode`` and
``rollout_frames``. An episode cut short (a kill, an infrastructure failure) is not saved.

Progress (`sgvla.core.progress`): the operator's verdict is the success, and so the stage ``placed``. With
perception the other stages are read from the scene as perceived after each control step (a step whose perception
is not fresh is skipped; the policy need not read the scene); without it nothing knows where the objects are, and
the record's progress is unknown (None) with failure class ``unknown`` (or ``gave_up``).

The keyboard: lines typed into the node's terminal (`on_keyboard`) count as well: Enter (or start) confirms, stop
stops, anything else is a verdict (its source: keyboard), under the same rules. Operator text that is none of these
is refused on `eval/operator` with what is valid, and waited for again.

ROS-free: the node hands `ArmProtocol` its inputs as they arrive (`on_joints`, `on_image`, `on_graph`,
`on_objects`, `on_confirm`, `on_verdict`, `on_keyboard`; messages are read by attribute only) and `ArmPorts`, the
callables that publish, log, subscribe and wait; `run` is one episode, a coroutine the node awaits.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sgvla.core.context import ContextMode
from sgvla.core.episode import Episode, EpisodeKey, EpisodeRecord, InfrastructureFailure
from sgvla.core.protocols import Step
from sgvla.core.state import Observation
from sgvla.eval.suite import SuiteConfig
from sgvla.policies.registry import PolicyConfig
from sgvla.policies.session import PolicySession
from sgvla.nodegraph.graph_sources import PerceivedGraph
from sgvla.scene_graph import load_ontology
from sgvla.so101.cameras import CAMERAS
from sgvla.so101.hardware.joints import JOINTS, from_radians
from sgvla.so101.hardware.protocol import (
    NoGraph,
    OperatorInputError,
    Verdict,
    home_error,
    home_goal,
    parse_confirm,
    parse_keyboard,
    parse_verdict,
    scene_card,
    verdict_facts,
)
from sgvla.so101.hardware.recording import RecordingError
from sgvla.so101.hardware.rollouts import RolloutStore
from sgvla.so101.hardware.safety import SafetyConfig
from sgvla.so101.kinematics import Kinematics, quaternion_matrix, transform
from sgvla.so101.learned import So101ChunkedPolicy
from sgvla.so101.perception.live import perceived_scene
from sgvla.so101.perception.poses import ObjectPose

VIEWS = CAMERAS  # the so101_hardware suite's views: the fiducial graphs the node subscribes
EARLY_VERDICT_S = 1.0  # an episode a verdict stops sooner than this after it started is flagged early_verdict


@dataclass(frozen=True)
class ArmGoal:
    """One ``run_episode`` goal as plain values (the node reads them off the action's goal)."""

    key: EpisodeKey
    episode: int
    max_steps: int  # 0: the suite's
    view: str
    suite: str
    suite_options: Mapping[str, Any] = field(default_factory=dict)
    policy_type: str = ""
    policy_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ArmSettings:
    """The node's parameters that the protocol reads."""

    safety: SafetyConfig  # the rig's: its limits bound the home goals too
    markers: Any  # sgvla.so101.perception.fiducials marker config: the perceived objects' extents
    record_cameras: Sequence[str] = ()  # rig cameras recorded in the rollouts
    camera_sizes: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # camera -> (height, width)
    joint_timeout_s: float = 5.0
    perception_timeout_s: float = 1.0
    image_timeout_s: float = 1.0
    rollouts: str = ""  # LeRobot dataset folder of the rollouts; empty: none
    rollout_repo_id: str = "local/so101_eval_rollouts"
    learned: Mapping[str, float] = field(default_factory=dict)  # min_inference_s, refill_at (LeRobot env config)

    @classmethod
    def of_rig(cls, rig, cameras: Sequence[str], **values) -> ArmSettings:
        """Settings on a rig config (`load_hardware_config`): the rollouts' ``cameras`` must be the rig's."""
        by_name = {c.name: c for c in rig.cameras}
        cameras = [n for n in cameras if n]
        missing = [n for n in cameras if n not in by_name]
        if missing:
            raise ValueError(f"arm_policy: camera(s) {missing} not in the rig config; it has {list(by_name)}")
        return cls(safety=rig.safety, record_cameras=tuple(cameras),
                   camera_sizes={n: (by_name[n].height, by_name[n].width) for n in cameras}, **values)


@dataclass(frozen=True)
class ArmPorts:
    """What the protocol does in the world, given by the node."""

    command: Callable[[dict[str, float]], None]  # joint goals, the arm's units (joint_commands, in radians)
    say: Callable[[str], None]  # a line for the operator: eval/operator (latched) and the log
    publish_task: Callable[[str], None]  # the episode's prompt on `task` (latched)
    sleep: Callable[[float], Awaitable[Any]]  # wait without blocking the inputs
    subscribe_images: Callable[[str], None] = lambda camera: None  # start receiving <camera>/image_raw
    decode_image: Callable[[Any], np.ndarray] = np.asarray  # an image message -> upright RGB array
    log_error: Callable[[str], None] = lambda text: None


def _said(verdict: Verdict) -> str:
    return f"{verdict.outcome}: {verdict.note}" if verdict.note else verdict.outcome


class OperatorVerdicts:
    """The verdicts of the current episode, under the module's rules; `offer` from any thread."""

    def __init__(self, say: Callable[[str], None], window_s: float, clock: Callable[[], float]) -> None:
        self.say, self.window_s, self.clock = say, window_s, clock
        self.lock = threading.Lock()
        self.phase = "idle"  # idle | before (episode N homes, shows its card, awaits start) | open | closed
        self.episode: int | None = None
        self.recorded: tuple[int, str] | None = None  # the last episode recorded and its verdict
        self.standing: Verdict | None = None
        self.first_at = 0.0
        self.history: list[dict[str, Any]] = []

    def expect(self, episode: int) -> None:
        """Episode `episode` is on its way (homing, scene card, confirmation): verdicts are refused until `open`."""
        with self.lock:
            self.phase, self.episode, self.standing, self.history = "before", episode, None, []

    def open(self) -> None:
        """The episode runs: its verdicts are taken."""
        with self.lock:
            self.phase = "open"

    @property
    def given(self) -> bool:
        return self.standing is not None

    def window_left(self) -> float:
        """Seconds until the verdict that stands is final (0 when none is given yet or the window has passed)."""
        with self.lock:
            if self.standing is None:
                return 0.0
            return max(self.first_at + self.window_s - self.clock(), 0.0)

    def close(self) -> tuple[Verdict, list[dict[str, Any]]]:
        """The verdict that stands, and the history the record keeps (later entries are appended to it)."""
        with self.lock:
            self.phase = "closed"
            return self.standing, self.history

    def done(self) -> None:
        """The episode is over (recorded, or failed): verdicts are refused until the next one's `open`."""
        with self.lock:
            if self.phase == "closed" and self.standing is not None:
                self.recorded = (self.episode, self.standing.outcome)
            self.phase, self.episode, self.standing = "idle", None, None

    def offer(self, verdict: Verdict) -> None:
        with self.lock:
            text = self._take(verdict)
        self.say(text)

    def _take(self, verdict: Verdict) -> str:
        new, n = _said(verdict), self.episode
        if self.phase in ("idle", "before"):
            if self.phase == "before":
                when = f"before episode {n} started (verdicts count once it runs, after start on eval/confirm)"
            elif self.recorded is not None:
                when = (f"before the next episode started (episode {self.recorded[0]} is recorded: "
                        f"{self.recorded[1]})")
            else:
                when = "before any episode started"
            return f"refused: verdict {new!r} arrived {when}; it was ignored"
        now = self.clock()
        entry = {"verdict": verdict.outcome, "note": verdict.note, "source": verdict.source,
                 "after_s": round(now - self.first_at, 3) if self.standing else 0.0}
        if self.standing is None:  # open: the first
            self.standing, self.first_at = verdict, now
            self.history.append({**entry, "status": "stands"})
            window = f"; a correction within {self.window_s:g} s replaces it" if self.window_s > 0 else ""
            return f"accepted verdict {new!r} for episode {n}{window}"
        old = _said(self.standing)
        if self.phase == "open" and self.window_s > 0 and now - self.first_at <= self.window_s:
            for e in self.history:
                if e["status"] == "stands":
                    e["status"] = "replaced"
            self.standing = verdict
            self.history.append({**entry, "status": "stands"})
            return f"replaced the verdict of episode {n}: {new!r} stands, {old!r} is replaced"
        self.history.append({**entry, "status": "refused"})
        why = (f"{now - self.first_at:.1f} s after the first, past the correction window of {self.window_s:g} s"
               if self.window_s > 0 else "after its first verdict (no correction window)")
        return f"refused: verdict {new!r} for episode {n} came {why}: {old!r} stands, {new!r} is ignored"


def no_chunk(policy, steps: int) -> str:
    """Why a learned policy never acted in an episode of ``steps`` control steps ("" when it did): no action chunk
    came from its inference, so every goal sent was the arm's own position (``So101ChunkedPolicy`` holds until the
    first chunk). Inference that never answers says nothing of the policy; inference that failed raised already."""
    if not isinstance(policy, So101ChunkedPolicy) or policy.actor is None or policy.actor.stats.chunks:
        return ""
    return (f"the policy produced no action: no action chunk came from its inference in {steps} control steps "
            "(the arm held where it was)")


class ArmProtocol:
    """Episodes on the arm with an operator; the node's inputs go to the ``on_*`` methods, `run` is an episode."""

    def __init__(self, settings: ArmSettings, ports: ArmPorts, clock: Callable[[], float] = time.monotonic,
                 policies: PolicySession | None = None) -> None:
        self.settings, self.ports, self.clock = settings, ports, clock
        self.kinematics = Kinematics()
        self.policies = policies or PolicySession()
        self.rollouts: RolloutStore | None = None  # opened at the first episode (the run folder exists by then)
        self.radians: dict[str, float] = {}  # the latest joint state as published (forward kinematics)
        self.joints: dict[str, float] | None = None  # the latest state, LeRobot units
        self.joints_at = 0.0
        self.objects = None  # (arrival time, ObjectStates) of perception/objects
        self.graphs: dict[str, tuple[float, Any]] = {}  # view -> (arrival time, the newest fiducial graph)
        self.images: dict[str, tuple[float, Any]] = {}  # camera -> (arrival time, the newest image)
        self.pixels: dict[str, tuple[Any, np.ndarray]] = {}  # camera -> (that image, its array)
        self.confirms: deque[str] = deque()
        self.verdicts = OperatorVerdicts(ports.say, 0.0, clock)  # each episode's window: its suite's
        self.busy = False
        self.or_keys = ""  # " (or type it here)" when the node reads the keyboard
        for camera in settings.record_cameras:
            self.watch(camera)

    def close(self) -> None:
        if self.rollouts is not None:  # drops an episode not saved, releases the dataset writer
            self.rollouts.close()
            self.rollouts = None
        self.policies.close()

    # -- inputs -----------------------------------------------------------------------------------

    def on_joints(self, names: Sequence[str], radians: Sequence[float]) -> None:
        self.joints = from_radians(names, radians)
        self.radians = dict(zip(names, (float(p) for p in radians)))
        self.joints_at = self.clock()

    def on_image(self, camera: str, msg) -> None:
        self.images[camera] = (self.clock(), msg)

    def on_graph(self, view: str, msg) -> None:
        """A fiducial graph of a view (the node passes those of source fiducial only)."""
        self.graphs[view] = (self.clock(), msg)

    def on_objects(self, msg) -> None:
        self.objects = (self.clock(), msg)

    def on_confirm(self, text: str) -> None:
        try:
            self.confirms.append(parse_confirm(text))
        except OperatorInputError as e:
            self.ports.say(f"refused: {e}")

    def on_verdict(self, text: str, source: str = "topic") -> None:
        try:
            verdict = parse_verdict(text, source)
        except OperatorInputError as e:
            self.ports.say(f"refused: {e}")
            return
        self.verdicts.offer(verdict)

    def on_keyboard(self, line: str) -> None:
        try:
            kind, value = parse_keyboard(line)
        except OperatorInputError as e:
            self.ports.say(f"refused: {e}")
            return
        if kind == "confirm":
            self.confirms.append(value)
        else:
            self.verdicts.offer(value)

    def watch(self, camera: str) -> None:
        """Keep the newest image of ``<camera>/image_raw`` (subscribed once per camera)."""
        if camera not in self.images:
            self.images[camera] = (-math.inf, None)
            self.ports.subscribe_images(camera)

    # -- inputs checked for freshness ---------------------------------------------------------------

    def present(self) -> dict[str, float]:
        timeout = self.settings.joint_timeout_s
        if self.joints is None or self.clock() - self.joints_at > timeout:
            raise InfrastructureFailure(f"no joint_states from the arm within joint_timeout_s={timeout:g}")
        return dict(self.joints)

    def image(self, camera: str) -> np.ndarray:
        """The newest image of a camera (upright RGB), or an infrastructure failure when there is none this recent."""
        arrived, msg = self.images[camera]
        timeout = self.settings.image_timeout_s
        if self.clock() - arrived > timeout:
            raise InfrastructureFailure(f"no {camera}/image_raw within image_timeout_s={timeout:g} "
                                        "(is the camera node running? `sgvla launch so101_eval cameras=true`)")
        cached = self.pixels.get(camera)
        if cached is None or cached[0] is not msg:
            cached = self.pixels[camera] = (msg, self.ports.decode_image(msg))
        return cached[1]

    def fresh(self, received, topic: str):
        """The message of (arrival time, message), or an infrastructure failure when there is none this recent."""
        timeout = self.settings.perception_timeout_s
        if received is None or self.clock() - received[0] > timeout:
            raise InfrastructureFailure(f"no {topic} within perception_timeout_s={timeout:g} "
                                        "(is fiducial_graphs running? `sgvla launch so101_eval perception=true`)")
        return received[1]

    def perceived(self, task: str):
        """The scene as perceived now (perception/objects, forward kinematics at the joint states)."""
        self.present()
        markers, poses = self.settings.markers, {}
        for obj in self.fresh(self.objects, "perception/objects").objects:
            if obj.name in markers.objects:
                q, p = obj.pose.orientation, obj.pose.position
                poses[obj.name] = ObjectPose(obj.name, transform(quaternion_matrix([q.x, q.y, q.z, q.w]),
                                                                 [p.x, p.y, p.z]), 0.0, 0, 0.0)
        return perceived_scene(poses, markers, self.kinematics, self.radians, task)

    def perceived_or_none(self, task: str):
        """The perceived scene for progress alone: None (the step's stages unknown) when perception is not fresh, which
        fails no episode whose policy does not read the scene."""
        try:
            return self.perceived(task)
        except InfrastructureFailure:
            return None

    def observation(self, prompt: str, cameras=()) -> Observation:
        """The arm now: joints in LeRobot units (``agent_pos``, JOINTS order) and the cameras' newest images."""
        positions = self.present()
        raw = {"agent_pos": np.array([positions[j] for j in JOINTS], dtype=np.float64),
               "pixels": {camera: self.image(camera) for camera in cameras}}
        return Observation({}, {}, raw, prompt)

    # -- an episode -------------------------------------------------------------------------------

    async def run(self, goal: ArmGoal) -> EpisodeRecord:
        """One goal's record; a failure (the arm, a bad spec, a policy that raised) is a record with infra_failure."""
        self.busy = True
        self.verdicts.expect(goal.episode)
        try:
            return await self.episode(goal)
        except Exception as exc:  # no result: the next run retries it
            self.ports.log_error(f"episode {goal.episode}: {type(exc).__name__}: {exc}")
            return EpisodeRecord.not_started(goal.key, exc, goal.max_steps, view=goal.view)
        finally:
            self.verdicts.done()
            self.busy = False

    def policy(self, goal: ArmGoal, suite):
        config = PolicyConfig.choice(goal.policy_type)(**goal.policy_options)
        env = dataclasses.replace(suite.lerobot_env_config(), **self.settings.learned) if config.learned else None
        policy = self.policies.get(config, suite, env)
        if isinstance(policy, So101ChunkedPolicy):  # the images it reads: subscribed before the episode runs
            for camera in policy.checkpoint.cameras:
                self.watch(camera)
        return policy

    async def episode(self, goal: ArmGoal) -> EpisodeRecord:
        suite = SuiteConfig.choice(goal.suite)(**goal.suite_options)
        if suite.privileged_scene or suite.in_process:
            raise ValueError(f"arm_policy runs suites of a physical arm (so101_hardware), not {suite.type!r}")
        policy = self.policy(goal, suite)
        try:
            return await self.steps(goal, suite, policy)
        finally:
            policy.close()  # what the episode holds (a chunked policy's inference thread); the policy stays cached
            if self.rollouts is not None:
                self.rollouts.discard()  # the frames of an episode not saved (an infrastructure failure)

    async def steps(self, goal: ArmGoal, suite, policy) -> EpisodeRecord:
        key, say, sleep = goal.key, self.ports.say, self.ports.sleep
        reads_scene = PolicyConfig.choice(goal.policy_type).needs_scene
        if reads_scene and not suite.knows_objects:
            raise ValueError(f"policy {goal.policy_type} reads object positions, which the suite does not know as "
                             f"configured{suite.setup_hint()}")
        stages = suite.stages(key.task_id)  # with perception; None: progress unknown
        info = suite.episode_info(key.task_id, key.perturbation) if reads_scene or stages is not None else {}
        if reads_scene:  # the controller's IK model is compiled now (seconds), not in the first control tick
            info["pick_place"](*info["goal"])
        period = 1.0 / suite.control_rate_hz
        cameras = sorted(set(self.settings.record_cameras) | set(policy.checkpoint.cameras
                                                                 if isinstance(policy, So101ChunkedPolicy) else ()))
        if self.settings.rollouts and self.rollouts is None:
            self.rollouts = RolloutStore(Path(self.settings.rollouts), suite.control_rate_hz,
                                         self.settings.camera_sizes, self.settings.rollout_repo_id)
        timings = {}
        started = self.clock()
        start_error, error = await self.home(suite, period)
        timings["home"] = self.clock() - started

        prompt, perturbation = suite.scene_card(key.task_id, key.perturbation)
        self.confirms.clear()
        say(f"confirm {scene_card(goal.episode, key, prompt, perturbation, suite.blind)} -- set the scene, "
            f"then publish start on eval/confirm{self.or_keys}")
        t = self.clock()
        while not (self.confirms and self.confirms.popleft() == "start"):
            await sleep(0.05)
        timings["confirm_wait"] = self.clock() - t

        self.verdicts.window_s = suite.verdict_window_s
        self.verdicts.open()
        say(f"running episode {goal.episode} (stop: publish stop on eval/confirm{self.or_keys})")
        max_steps = int(goal.max_steps) or suite.max_steps
        source = (PerceivedGraph(lambda view: self.fresh(self.graphs.get(view), f"scene_graph/{view}"),
                                 lambda: self.fresh(self.objects, "perception/objects"))
                  if suite.perception else NoGraph())
        engine = Episode(key, policy, ContextMode.choice(key.mode)(), source, load_ontology(suite.ontology),
                         view=goal.view, max_steps=max_steps, info=info, stages=stages)
        self.ports.publish_task(prompt)
        t = self.clock()
        stopped_by, early = "time limit", False
        scene = (lambda: self.perceived(prompt)) if reads_scene else (lambda: None)  # noqa: E731
        seen = (lambda: self.perceived_or_none(prompt)) if stages is not None else (lambda: None)  # noqa: E731
        if self.rollouts is not None:
            self.rollouts.begin(prompt)
        observation = self.observation(prompt, cameras)
        engine.start(prompt, Step(observation, scene() if reads_scene else seen()))
        next_tick = self.clock()
        while not engine.done:
            observation = self.observation(prompt, cameras)
            action = engine.act(Step(observation, scene()))
            if action is None:  # the policy gave up: the operator still gives the verdict
                stopped_by = f"policy gave up: {engine.gave_up}"
                break
            # the pick-and-place controller's goals are radians (URDF joints); other policies act in the arm's units
            if reads_scene:
                sent = from_radians(JOINTS, action)
            else:
                sent = dict(zip(JOINTS, (float(a) for a in action), strict=True))
            self.ports.command(sent)
            if self.rollouts is not None:
                self.rollouts.add(dict(zip(JOINTS, observation.raw["agent_pos"])), sent, observation.raw["pixels"])
            next_tick += period
            await sleep(max(next_tick - self.clock(), 0.001))
            operator_stop = "stop" in self.confirms or self.verdicts.given
            if operator_stop:
                stopped_by = "operator"
                early = self.verdicts.given and "stop" not in self.confirms and self.clock() - t < EARLY_VERDICT_S
            engine.observe(False, operator_stop, seen())
        timings["run"] = self.clock() - t
        silent = engine.no_action() or no_chunk(policy, engine.steps)
        if silent:  # nothing of the policy to judge: no verdict is asked for, the next run repeats the episode
            say(f"episode {goal.episode}: {silent}; not a result, no verdict needed: the next run repeats it")
            return engine.record_failure(InfrastructureFailure(silent), perturbation_applied=perturbation,
                                         home_start_error_deg=round(start_error, 3), stopped_by=stopped_by,
                                         **{f"{phase}_s": round(seconds, 3) for phase, seconds in timings.items()})

        t = self.clock()
        say(f"verdict episode {goal.episode}: {engine.steps} steps ({stopped_by}); publish "
            f"success|failure|invalid [note] on eval/verdict{self.or_keys}")
        while not self.verdicts.given:
            await sleep(0.05)
        timings["verdict_wait"] = self.clock() - t
        while (left := self.verdicts.window_left()) > 0:  # a correction may still replace it
            await sleep(min(left, 0.05))
        verdict, history = self.verdicts.close()
        engine.success = verdict.success  # the operator's verdict is the success, and the stage placed
        record = engine.record(perturbation_applied=perturbation, home_start_error_deg=round(start_error, 3),
                               **verdict_facts(verdict, stopped_by, error, timings), verdict_history=history,
                               early_verdict=early)
        record.success = verdict.success
        note = f": {verdict.note}" if verdict.note else ""
        record.failure_reason = "" if verdict.success else f"operator verdict {verdict.outcome}{note}"
        if verdict.outcome == "invalid":
            record.infra_failure = f"the operator marked the episode invalid{note}"
        if self.rollouts is not None:
            facts = {**key._asdict(), "episode": int(goal.episode), "verdict": verdict.outcome,
                     "operator_note": verdict.note, "valid": verdict.outcome != "invalid"}
            try:
                record.extra.update(await self.in_thread(self.rollouts.save, facts))
            except RecordingError as e:  # no replayable rollout: run it again
                record.infra_failure = f"the rollout could not be saved: {e}"
        say(f"recorded episode {goal.episode}: {verdict.outcome}{note}")
        return record

    async def in_thread(self, work, *args):
        """``work(*args)`` in a thread of its own (a rollout's save encodes video for seconds), awaited without
        blocking the executor: joint states and the operator's input keep coming in meanwhile."""
        box: dict = {}

        def run():
            try:
                box["value"] = work(*args)
            except BaseException as e:  # noqa: BLE001 - raised here, in the episode
                box["error"] = e

        thread = threading.Thread(target=run, name="rollout-save")
        thread.start()
        while thread.is_alive():
            await self.ports.sleep(0.02)
        if "error" in box:
            raise box["error"]
        return box["value"]

    async def home(self, suite, period: float) -> tuple[float, float]:
        """Drive to the home pose at bounded speed; (the error it started from, the error once within tolerance),
        degrees: the largest joint's."""
        deadline = self.clock() + suite.home_timeout_s
        start_error = None
        while True:
            try:
                present = self.present()
            except InfrastructureFailure:
                if self.clock() > deadline:
                    raise
                await self.ports.sleep(0.05)
                continue
            error = home_error(suite.home, present)
            start_error = error if start_error is None else start_error
            if error <= suite.home_tolerance_deg:
                return start_error, error
            if self.clock() > deadline:
                raise InfrastructureFailure(f"home pose not reached within home_timeout_s={suite.home_timeout_s:g} "
                                            f"(largest joint error {error:.1f} deg)")
            self.ports.command(home_goal(suite.home, present, self.settings.safety, suite.home_step_deg))
            await self.ports.sleep(period)
