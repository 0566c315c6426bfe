"""Progress, not only success (sgvla.core.progress): the stage tracker on synthetic scenes for every failure class,
the record's fields, then real episodes: the scripted expert on LIBERO-Spatial and on the SO101 twin reaches every
stage in order, and forced failures (the look-alike bowl, a gripper opened early, a step limit, a give-up) get their
class."""

import json

import numpy as np
import pytest

import sgvla.plugins  # noqa: F401
from sgvla.core.context import ContextMode
from sgvla.core.episode import Episode, EpisodeKey, EpisodeRecord
from sgvla.core.progress import STAGES, PickPlaceSpec, summarize
from sgvla.core.protocols import PolicyGaveUp, Step, StepInput
from sgvla.core.state import Boxes, Observation, SceneState
from sgvla.eval.loop import run_episode
from sgvla.eval.runner import run_plan
from sgvla.eval.suite import SuiteConfig
from sgvla.policies.scripted import ExpertPolicy
from sgvla.scene_graph import GeomBatch, load_ontology

from .plans import records_by_key, small_config

SPEC = PickPlaceSpec(opening=(1.0, -1.0), closed_below=0.04)  # the Panda's fingers
OPEN, CLOSED = (0.04, -0.04), (0.003, -0.003)
HALF = {"bowl": (0.04, 0.04, 0.025), "other_bowl": (0.04, 0.04, 0.025), "plate": (0.1, 0.1, 0.01)}
START = {"bowl": (0.0, 0.0, 0.025), "other_bowl": (0.2, 0.0, 0.025), "plate": (0.0, 0.3, 0.01)}


def scene(eef, gripper=OPEN, drop=(), **moved) -> SceneState:
    """One box per object at its position (START unless moved), the end effector and the fingers; `drop`: objects
    not perceived."""
    objects = {**START, **moved}
    for name in drop:
        objects.pop(name)
    names = tuple(objects)
    positions = np.array([objects[n] for n in names], np.float64).reshape(-1, 3)
    geoms = GeomBatch(geom_object=np.arange(len(names)), centers=positions[None].copy(),
                      rotations=np.broadcast_to(np.eye(3), (1, len(names), 3, 3)).copy(),
                      half_sizes=np.array([HALF[n] for n in names], np.float64).reshape(-1, 3), n_objects=len(names))
    empty = Boxes(np.zeros(0, int), np.zeros((0, 3)), np.zeros((0, 3, 3)), np.zeros((0, 3)))
    return SceneState(names, positions, geoms, {}, np.asarray(eef, np.float64), np.eye(3),
                      np.asarray(gripper, np.float64), "pick up the bowl", empty)


def track(scenes, success=False, gave_up="", target="bowl"):
    tracker = SPEC.tracker(target, "plate")
    for step, s in enumerate(scenes):
        tracker.observe(step, s)
    return summarize(tracker, success, len(scenes) - 1, gave_up)


ABOVE = (0.0, 0.0, 0.2)
AT = (0.04, 0.0, 0.04)  # at the bowl's wall
PICK = [scene(ABOVE), scene(AT), scene(AT, CLOSED), scene(AT, CLOSED, bowl=(0.0, 0.0, 0.04)),  # grasped at 3
        scene((0.04, 0.0, 0.1), CLOSED, bowl=(0.0, 0.0, 0.085))]  # lifted at 4


def test_a_placed_bowl_reaches_every_stage_in_order():
    over = scene((0.04, 0.3, 0.1), CLOSED, bowl=(0.0, 0.3, 0.085))
    placed = scene((0.04, 0.3, 0.05), OPEN, bowl=(0.0, 0.3, 0.045))
    p = track([*PICK, over, placed], success=True)
    assert p.stages == {"reached": 1, "grasped": 3, "lifted": 4, "over_place": 5, "placed": 6}
    assert list(p.stages) == list(STAGES) and p.progress == 1.0 and p.failure_class == ""


def test_a_bowl_let_go_after_the_lift_is_dropped():
    fell = scene((0.04, 0.15, 0.1), OPEN, bowl=(0.0, 0.15, 0.025))
    p = track([*PICK, fell])
    assert p.stages == {"reached": 1, "grasped": 3, "lifted": 4} and p.progress == pytest.approx(0.6)
    assert p.failure_class == "dropped"


def test_a_bowl_still_held_at_the_limit_timed_out():
    p = track(PICK)
    assert p.progress == pytest.approx(0.6) and p.failure_class == "timed_out"


def test_a_gripper_closed_beside_the_bowl_that_never_lifts_it_missed_the_grasp():
    p = track([scene(ABOVE), scene(AT), scene(AT, CLOSED), scene((0.04, 0.0, 0.1), CLOSED), scene(ABOVE, OPEN)])
    assert p.stages == {"reached": 1} and p.progress == pytest.approx(0.2) and p.failure_class == "missed_grasp"


def test_a_bowl_nudged_by_open_fingers_then_closed_on_nothing_is_no_grasp():
    nudged = (0.015, 0.0, 0.025)
    p = track([scene(ABOVE), scene(AT), scene(AT, bowl=nudged), scene(AT, CLOSED, bowl=nudged),
               scene((0.04, 0.0, 0.1), CLOSED, bowl=nudged)])
    assert p.stages == {"reached": 1} and p.failure_class == "missed_grasp"


def test_a_policy_on_its_way_or_idle_timed_out():
    assert track([scene(ABOVE), scene((0.0, 0.0, 0.15))]) == track([scene(ABOVE)] * 2)
    p = track([scene(ABOVE), scene((0.0, 0.0, 0.15))])
    assert p.stages == {} and p.progress == 0.0 and p.failure_class == "timed_out"
    reached = track([scene(ABOVE), scene(AT)])  # at the bowl, the gripper never closed: no grasp was tried
    assert reached.progress == pytest.approx(0.2) and reached.failure_class == "timed_out"


def test_the_look_alike_bowl_lifted_is_the_wrong_object():
    wall = (0.24, 0.0, 0.04)
    p = track([scene(ABOVE), scene(wall), scene(wall, CLOSED), scene(wall, CLOSED, other_bowl=(0.2, 0.0, 0.04)),
               scene((0.24, 0.0, 0.1), CLOSED, other_bowl=(0.2, 0.0, 0.085))])
    assert p.stages == {} and p.progress == 0.0 and p.failure_class == "wrong_object"
    # Knocking it while the target is held is not a wrong object
    knocked = scene((0.04, 0.0, 0.1), CLOSED, bowl=(0.0, 0.0, 0.085), other_bowl=(0.05, 0.0, 0.06))
    assert track([*PICK, knocked]).failure_class == "timed_out"


def test_stages_are_cumulative_and_over_place_needs_a_lift():
    # A lift seen before the gripper read as closed is a grasp too, at the same step
    lifted = track([scene(ABOVE), scene((0.04, 0.0, 0.1), (0.03, -0.03), bowl=(0.0, 0.0, 0.085))])
    assert lifted.stages == {"reached": 1, "grasped": 1, "lifted": 1}
    # A bowl pushed over the plate (never lifted) is not over it
    pushed = track([scene(ABOVE), scene((0.04, 0.3, 0.04), OPEN, bowl=(0.0, 0.3, 0.04))])
    assert pushed.stages == {"reached": 1}
    # Success reaches every stage, at the success's step where not seen before
    assert track([scene(ABOVE), scene(AT)], success=True).stages == {"reached": 1, **{s: 1 for s in STAGES[1:]}}


def test_give_ups_and_what_was_not_perceived():
    assert track([scene(ABOVE)], gave_up="the policy cannot act").failure_class == "gave_up"
    reason = "none of bowl, other_bowl in the scene it was given (plate)"  # scripted.require_objects' words
    assert track([scene(ABOVE)], gave_up=reason).failure_class == "perceived_nothing"
    lacking = track([scene(ABOVE, drop=["plate"])], gave_up="no place")  # what it was given lacked the goal's
    assert lacking.failure_class == "perceived_nothing" and lacking.progress == 0.0
    never = track([scene(ABOVE, drop=["bowl"])] * 3)  # scenes came, never with the target: progress unknown
    assert never.progress is None and never.stages == {} and never.failure_class == "perceived_nothing"


def test_without_scenes_progress_is_unknown():
    assert summarize(None, False, 30) == summarize(SPEC.tracker("bowl", "plate"), False, 30)
    p = summarize(None, False, 30)
    assert p.progress is None and p.stages == {} and p.failure_class == "unknown"
    assert summarize(None, False, 3, "nothing perceived").failure_class == "perceived_nothing"
    assert summarize(None, False, 3, "out of ideas").failure_class == "gave_up"
    assert summarize(None, True, 30).failure_class == "" and summarize(None, True, 30).progress is None


def test_the_gripper_reading_is_the_embodiments():
    jaw = PickPlaceSpec(opening=(1.0,), closed_below=0.415)  # the SO101's jaw, radians
    assert jaw.closed([-0.04]) and not jaw.closed([1.0])
    with pytest.raises(ValueError, match="gripper_qpos has 2 values"):
        jaw.closed([0.04, -0.04])


# -- the record ---------------------------------------------------------------------------------------------------

class Stub:
    """A policy and a graph source for the engine without a simulator."""

    name = "stub"

    def __init__(self, give_up_at=None):
        self.give_up_at, self.steps = give_up_at, 0

    def reset(self, prompt="", seed=None):
        self.steps = 0

    def act(self, step):
        self.steps += 1
        if self.steps == self.give_up_at:
            raise PolicyGaveUp("nothing detected")
        return np.zeros(7)

    def prompt_budget(self, prompt):
        return None

    def decision(self):
        return {}

    def stats(self):
        return {}

    def close(self):
        pass


OBS = Observation({}, {}, {}, "")


def engine(scenes, stages=SPEC, max_steps=10, give_up_at=None, goal=("bowl", "plate")):
    """The engine stepped over `scenes` (the first at start; None: no scene that step) as a driver steps it."""
    key = EpisodeKey("stub", 0, "none", "standard", 0)
    e = Episode(key, Stub(give_up_at), ContextMode.choice("standard")(), Stub(), load_ontology("libero_spatial"),
                view="agentview", max_steps=max_steps, info={"goal": goal} if goal else {}, stages=stages)
    e.start("pick up the bowl", Step(OBS, scenes[0]))
    for s in scenes[1:]:
        if e.act(Step(OBS, None)) is None or e.observe(False, False, s):
            break
    return e


def test_the_record_holds_progress_and_round_trips():
    record = engine([*PICK, scene((0.04, 0.15, 0.1), OPEN, bowl=(0.0, 0.15, 0.025))]).record()
    assert (record.progress, record.stages, record.failure_class) == (
        pytest.approx(0.6), {"reached": 1, "grasped": 3, "lifted": 4}, "dropped")
    data = json.loads(json.dumps(record.to_json()))
    assert data["progress"] == pytest.approx(0.6) and data["failure_class"] == "dropped"
    assert EpisodeRecord.from_json(data) == record
    # Records written before these fields existed still load (progress unknown, the class not recorded)
    old = {k: v for k, v in data.items() if k not in ("progress", "stages", "failure_class")}
    loaded = EpisodeRecord.from_json(old)
    assert loaded.progress is None and loaded.stages == {} and loaded.failure_class is None


def test_the_engine_without_scenes_or_stages_records_unknown():
    arm = engine([None] * 4).record()  # the arm without perception: no scene
    assert (arm.progress, arm.stages, arm.failure_class) == (None, {}, "unknown")
    assert engine(PICK, stages=None).record().progress is None
    assert engine(PICK, goal=None).record().progress is None  # no goal told: nothing to track
    gave = engine(PICK, give_up_at=3).record()
    assert gave.failure_class == "perceived_nothing" and gave.stages == {"reached": 1} and gave.steps == 2
    e = engine([None] * 4)
    e.success = True  # the operator's verdict on the arm
    assert e.record().failure_class == "" and e.record().progress is None


@pytest.mark.parametrize("verdict, failure", [("failure missed it", "unknown"), ("success", "")])
def test_on_the_arm_without_perception_the_verdict_decides_and_progress_is_unknown(verdict, failure):
    from ..hardware.test_arm_protocol import HOME, FakeArm

    arm = FakeArm(lambda line: [("confirm", "start")] if line.startswith("confirm") else
                  [("verdict", verdict)] if line.startswith("verdict") else [], start=HOME, window_s=0.0)
    record = arm.run()
    assert record.success == (verdict == "success") and record.steps == 10
    assert (record.progress, record.stages, record.failure_class) == (None, {}, failure)


def test_an_infrastructure_failure_has_no_progress():
    record = engine(PICK).record_failure(RuntimeError("the simulator died"))
    assert (record.progress, record.stages, record.failure_class) == (None, {}, None)


# -- real episodes ------------------------------------------------------------------------------------------------

class GraphFree:
    """The graph source of a standard-mode episode: never asked for a graph."""

    name = "none"

    def reset(self):
        pass

    def stats(self):
        return {}

    def close(self):
        pass


class Expert(ExpertPolicy):
    """The expert, told another target (`target`), or with its gripper forced open in some phases (`open_in`)."""

    def __init__(self, target=None, open_in=()):
        super().__init__("expert")
        self.target, self.open_in = target, tuple(open_in)

    def act(self, step):
        if self.target is not None:
            step = StepInput(step.observation, step.prompt, step.scene,
                             {**step.info, "goal": (self.target, step.info["goal"][1])})
        action = np.array(super().act(step))
        if self.controller.phase in self.open_in:
            action[-1] = -1.0  # LIBERO's gripper: -1 opens
        return action


class GivesUp(ExpertPolicy):
    def act(self, step):
        if self.controller is not None and self.controller.phase == "grip":
            raise PolicyGaveUp("lost track of the bowl")
        return super().act(step)


@pytest.fixture(scope="module")
def libero():
    suite = SuiteConfig.choice("libero_spatial")(render_profile="fast", image_size=64)
    backend = suite.make_backend(0, "none", False)
    yield backend
    backend.close()


def libero_episode(backend, policy, max_steps):
    key = EpisodeKey("expert", 0, "none", "standard", 0)
    e = Episode(key, policy, ContextMode.choice("standard")(), GraphFree(), load_ontology("libero_spatial"),
                view="agentview", max_steps=max_steps, stages=SuiteConfig.choice("libero_spatial")().stages(0))
    return run_episode(backend, e)


@pytest.mark.sim
def test_libero_expert_reaches_every_stage_in_order(libero):
    record = libero_episode(libero, Expert(), 200)
    assert record.success and record.progress == 1.0 and record.failure_class == ""
    assert list(record.stages) == list(STAGES) and record.stages["placed"] == record.steps
    steps = list(record.stages.values())
    assert steps == sorted(steps) and steps[0] > 0 and len(set(steps)) == len(steps), record.stages


@pytest.mark.sim
@pytest.mark.parametrize("policy, max_steps, failure, progress", [
    (lambda: Expert(target="akita_black_bowl_2"), 160, "wrong_object", 0.0),  # the look-alike bowl, onto the plate
    (lambda: Expert(open_in=("carry", "lower", "release")), 120, "dropped", 0.6),
    (lambda: Expert(open_in=("lift", "carry", "lower")), 120, "missed_grasp", 0.2),
    (lambda: Expert(), 20, "timed_out", 0.0),
    (lambda: GivesUp(), 60, "gave_up", 0.2),
], ids=["wrong_object", "dropped", "missed_grasp", "timed_out", "gave_up"])
def test_libero_forced_failures_get_their_class(libero, policy, max_steps, failure, progress):
    record = libero_episode(libero, policy(), max_steps)
    assert not record.success and record.failure_class == failure, (record.stages, record.failure_reason)
    assert record.progress == pytest.approx(progress), record.stages


@pytest.mark.sim
def test_plan_runs_record_progress(tmp_path):
    """Through the runner (worker, results file): the expert's record carries the stages; a short one its class."""
    cfg = small_config(tmp_path, policies=[{"type": "expert"}], modes=["standard"], perturbations="none",
                       max_steps=200)
    assert run_plan(cfg, progress=False).complete
    (record,) = records_by_key(tmp_path).values()
    assert record["success"] and record["progress"] == 1.0 and record["failure_class"] == ""
    assert set(record["stages"]) == set(STAGES) and record["stages"]["placed"] == record["steps"]


@pytest.mark.sim
def test_twin_expert_reaches_every_stage(tmp_path):
    cfg = small_config(tmp_path, suite={"type": "so101_twin"}, policies=[{"type": "expert"}], modes=["standard"],
                       perturbations="none", max_steps=250)
    assert run_plan(cfg, progress=False).complete
    (record,) = records_by_key(tmp_path).values()
    assert record["success"] and record["progress"] == 1.0 and record["failure_class"] == ""
    steps = [record["stages"][s] for s in STAGES]  # each seen at a step of its own, in order
    assert steps == sorted(steps) and len(set(steps)) == len(steps) and steps[-1] == record["steps"], record["stages"]
