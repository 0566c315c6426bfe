"""The arm's episode protocol (sgvla.nodegraph.arm_protocol) without ROS: a fake arm that follows its goals, an
operator that answers the lines of eval/operator, a clock that moves only when the protocol waits.

Issue 32: a verdict before the episode runs is refused and never applied to it; verdicts after the first are
answered (replaced within the correction window, refused after it), never dropped silently; homing is bounded per
tick."""

import asyncio

import pytest

import sgvla.plugins  # noqa: F401
from sgvla.core.episode import EpisodeKey
from sgvla.eval.suite import SuiteConfig
from sgvla.nodegraph.arm_protocol import ArmGoal, ArmPorts, ArmProtocol, ArmSettings, OperatorVerdicts
from sgvla.so101.hardware.joints import JOINTS, to_radians
from sgvla.so101.hardware.protocol import Verdict
from sgvla.so101.hardware.safety import SafetyConfig

HOME = {j: 0.0 for j in JOINTS} | {"gripper": 10.0}
SUITE = {"episode_time_s": 1.0, "control_rate_hz": 10.0, "home_step_deg": 3.0, "home_tolerance_deg": 1.0,
         "home_timeout_s": 30.0, "home": HOME}


class FakeArm:
    """The arm (it reaches each goal by the next tick), the clock, and an operator: `script(line)` answers a line of
    eval/operator with (topic, text) messages that arrive at the protocol's next wait."""

    def __init__(self, script, start: dict[str, float], window_s: float = 3.0):
        self.window_s = window_s  # the suite's verdict_window_s
        self.now = 100.0
        self.position = dict(start)
        self.said: list[tuple[float, str]] = []
        self.sent: list[tuple[dict, dict]] = []  # (where the arm was, the goal sent)
        self.script, self.inbox = script, []
        self.timed: list[tuple[float, str, str]] = []  # (when, topic, text): sent at that time
        ports = ArmPorts(command=self.command, say=self.say, publish_task=lambda prompt: None, sleep=self.sleep)
        self.protocol = ArmProtocol(ArmSettings(safety=SafetyConfig(), markers=None),
                                    ports, clock=lambda: self.now)
        self.publish_joints()

    def publish_joints(self):
        self.protocol.on_joints(list(JOINTS), to_radians(self.position))

    def command(self, goal):
        self.sent.append((dict(self.position), dict(goal)))
        self.pending_goal = goal

    def say(self, text):
        self.said.append((self.now, text))
        self.inbox.extend(self.script(text))

    async def sleep(self, seconds):
        self.now += seconds
        goal = getattr(self, "pending_goal", None)
        if goal is not None:
            self.position, self.pending_goal = dict(goal), None
        self.publish_joints()
        self.inbox += [(topic, text) for when, topic, text in self.timed if when <= self.now]
        self.timed = [t for t in self.timed if t[0] > self.now]
        while self.inbox:
            topic, text = self.inbox.pop(0)
            {"confirm": self.protocol.on_confirm, "verdict": self.protocol.on_verdict,
             "keyboard": self.protocol.on_keyboard}[topic](text)

    def run(self, episode=0):
        goal = ArmGoal(EpisodeKey("hold", 0, "none", "standard", 0), episode, 0, "agentview", "so101_hardware",
                       SUITE | {"verdict_window_s": self.window_s}, "hold", {})
        return asyncio.run(self.protocol.run(goal))

    def lines(self, word=""):
        return [text for _, text in self.said if word in text]


def test_a_verdict_before_the_episode_runs_is_refused_and_never_applied():
    def operator(line):
        if line.startswith("confirm"):  # the scene card: a verdict while start is awaited, by topic and keyboard
            return [("verdict", "success"), ("keyboard", "success typed early"), ("confirm", "start")]
        if line.startswith("verdict"):
            return [("verdict", "failure dropped the bowl")]
        return []

    arm = FakeArm(operator, start=HOME | {"shoulder_pan": 20.0})
    arm.protocol.on_verdict("success")  # before any episode: refused at once
    record = arm.run()
    assert arm.lines("refused")[0] == "refused: verdict 'success' arrived before any episode started; it was ignored"
    early = [t for t in arm.lines("refused") if "before episode 0 started" in t]
    assert len(early) == 2 and all("ignored" in t for t in early), arm.said
    assert "'success: typed early'" in early[1]
    # The episode ran to its time limit; the verdict is the one given after it.
    assert (record.success, record.steps, record.extra["stopped_by"]) == (False, 10, "time limit")
    assert (record.extra["verdict"], record.extra["operator_note"]) == ("failure", "dropped the bowl")
    assert [(v["verdict"], v["status"]) for v in record.extra["verdict_history"]] == [("failure", "stands")]
    assert record.failure_reason == "operator verdict failure: dropped the bowl"
    # Between episodes (after the record), a verdict is refused as well, naming the episode recorded.
    arm.protocol.on_verdict("invalid")
    assert arm.lines()[-1] == ("refused: verdict 'invalid' arrived before the next episode started (episode 0 is "
                               "recorded: failure); it was ignored")


def test_verdicts_after_the_first_replace_it_within_the_window_and_each_is_answered():
    def operator(line):
        if line.startswith("confirm"):
            return [("confirm", "start")]
        if line.startswith("verdict"):  # three at once: the last one stands
            return [("verdict", "success"), ("verdict", "failure missed"), ("keyboard", "invalid bowl was moved")]
        return []

    arm = FakeArm(operator, start=HOME, window_s=2.0)
    record = arm.run()
    assert arm.lines("accepted") == ["accepted verdict 'success' for episode 0; a correction within 2 s replaces it"]
    assert arm.lines("replaced") == [
        "replaced the verdict of episode 0: 'failure: missed' stands, 'success' is replaced",
        "replaced the verdict of episode 0: 'invalid: bowl was moved' stands, 'failure: missed' is replaced"]
    assert (record.extra["verdict"], record.extra["verdict_source"]) == ("invalid", "keyboard")
    assert record.infra_failure == "the operator marked the episode invalid: bowl was moved"
    assert record.extra["stopped_by"] == "time limit" and record.extra["early_verdict"] is False
    assert [(v["verdict"], v["source"], v["status"]) for v in record.extra["verdict_history"]] == [
        ("success", "topic", "replaced"), ("failure", "topic", "replaced"), ("invalid", "keyboard", "stands")]
    # The record waited for the window: written no sooner than 2 s after the first verdict.
    first = next(t for t, text in arm.said if text.startswith("accepted"))
    recorded = next(t for t, text in arm.said if text.startswith("recorded"))
    assert recorded - first >= 2.0 - 1e-9 and arm.lines()[-1] == "recorded episode 0: invalid: bowl was moved"


def test_a_verdict_while_running_stops_the_episode_and_a_correction_replaces_it():
    def operator(line):
        if line.startswith("confirm"):
            return [("confirm", "start")]
        if line.startswith("running"):  # judged 0.25 s into the run (of 1 s), corrected at the next tick
            arm.timed.append((arm.now + 0.25, "verdict", "success"))
        if line.startswith("accepted"):
            return [("verdict", "failure it slipped")]
        return []

    arm = FakeArm(operator, start=HOME)
    record = arm.run()
    assert record.extra["stopped_by"] == "operator" and 2 <= record.steps <= 4
    assert record.extra["early_verdict"] is True  # stopped by a verdict 0.25 s in: flagged
    assert (record.extra["verdict"], record.success) == ("failure", False)
    assert [v["status"] for v in record.extra["verdict_history"]] == ["replaced", "stands"]
    assert arm.lines("replaced") == [
        "replaced the verdict of episode 0: 'failure: it slipped' stands, 'success' is replaced"]


def test_with_no_window_the_first_verdict_stands_and_later_ones_are_refused_by_name():
    def operator(line):
        if line.startswith("confirm"):
            return [("confirm", "start")]
        if line.startswith("verdict"):
            return [("verdict", "success"), ("verdict", "failure oops")]
        return []

    arm = FakeArm(operator, start=HOME, window_s=0.0)
    record = arm.run()
    assert record.extra["verdict"] == "success" and record.success
    assert arm.lines("accepted") == ["accepted verdict 'success' for episode 0"]
    assert arm.lines("refused") == ["refused: verdict 'failure: oops' for episode 0 came after its first verdict "
                                    "(no correction window): 'success' stands, 'failure: oops' is ignored"]
    assert [(v["verdict"], v["status"]) for v in record.extra["verdict_history"]] == [
        ("success", "stands"), ("failure", "refused")]


def test_a_verdict_past_the_correction_window_is_refused_naming_the_one_that_stands():
    now, said = [0.0], []
    verdicts = OperatorVerdicts(said.append, 3.0, lambda: now[0])
    verdicts.expect(4)
    verdicts.open()
    verdicts.offer(Verdict("success"))
    now[0] = 3.5
    verdicts.offer(Verdict("failure", "too late"))
    assert said[-1] == ("refused: verdict 'failure: too late' for episode 4 came 3.5 s after the first, past the "
                        "correction window of 3 s: 'success' stands, 'failure: too late' is ignored")
    assert verdicts.close()[0] == Verdict("success")


def test_homing_moves_at_most_home_step_deg_per_tick():
    arm = FakeArm(lambda line: [], start=HOME | {"shoulder_pan": 40.0, "elbow_flex": -25.0, "gripper": 50.0})
    suite = SuiteConfig.choice("so101_hardware")(**SUITE)
    start_error, error = asyncio.run(arm.protocol.home(suite, 0.1))
    assert start_error == pytest.approx(40.0) and error <= 1.0
    assert len(arm.sent) >= 40.0 / 3.0
    for present, goal in arm.sent:
        assert max(abs(goal[j] - present[j]) for j in JOINTS) <= 3.0 + 1e-9, (present, goal)


def test_homing_without_joint_states_is_an_infrastructure_failure():
    from sgvla.core.episode import InfrastructureFailure

    arm = FakeArm(lambda line: [], start=HOME)
    arm.protocol.joints = None
    arm.publish_joints = lambda: None  # the arm is silent
    suite = SuiteConfig.choice("so101_hardware")(**SUITE | {"home_timeout_s": 1.0})
    with pytest.raises(InfrastructureFailure, match="no joint_states from the arm within joint_timeout_s=5"):
        asyncio.run(arm.protocol.home(suite, 0.1))

