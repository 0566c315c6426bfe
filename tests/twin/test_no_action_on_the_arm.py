"""An episode on the arm in which the policy never acted is no result (issue 41): the arm's protocol records it as an
infrastructure failure with its cause, asks the operator for no verdict, and the evaluator files it so that the next
run repeats it. Forced here with the arm's own protocol (`sgvla.nodegraph.arm_protocol`, without ROS: the fake arm of
tests/hardware/test_arm_protocol.py), the real prompt-grounded policy and a perception that sees nothing: under load a
perception caught mid-change gave that policy an incomplete scene at its first step, and the episode was recorded as
the policy's failure with 0 steps."""

import asyncio
import dataclasses
import types

import sgvla.plugins  # noqa: F401
from sgvla.core.config import from_mapping
from sgvla.core.episode import EpisodeKey
from sgvla.eval.config import EvalConfig
from sgvla.nodegraph.arm_protocol import ArmGoal
from sgvla.nodegraph.evaluation import TopicEvaluation
from sgvla.so101.perception.fiducials import load_marker_config

from ..hardware.test_arm_protocol import HOME, SUITE, FakeArm

GAVE_UP = ("InfrastructureFailure: the policy produced no action: it gave up before its first (none of black_bowl_1, "
           "black_bowl_2 in the scene it was given (empty))")


def blind_arm() -> FakeArm:
    """The fake arm, an operator who confirms every scene and fails every episode he is asked about, and a
    perception that keeps publishing that it sees no object."""

    def operator(line: str):
        if line.startswith("confirm"):
            return [("confirm", "start")]
        if line.startswith("verdict"):
            return [("verdict", "failure asked for a verdict")]
        return []

    arm = FakeArm(operator, start=HOME)
    protocol = arm.protocol
    protocol.settings = dataclasses.replace(protocol.settings, markers=load_marker_config())
    seen_nothing = types.SimpleNamespace(objects=[])
    publish_joints = arm.publish_joints

    def publish():  # at every wait of the protocol: the joints, and perception/objects (fresh, and empty)
        publish_joints()
        protocol.on_objects(seen_nothing)

    arm.publish_joints = publish
    publish()
    return arm


def test_an_episode_in_which_the_policy_never_acted_is_no_result_and_the_next_run_repeats_it(tmp_path):
    cfg = from_mapping(EvalConfig, {
        "name": "blind_arm", "suite": {"type": "so101_hardware", "perception": True, **SUITE, "verdict_window_s": 0.5},
        "graph_source": "fiducial", "policies": [{"type": "prompt_grounded"}], "tasks": [1], "perturbations": "none",
        "modes": ["standard"], "episodes": 1, "output_dir": str(tmp_path)})
    evaluation = TopicEvaluation(cfg)
    try:
        goal = evaluation.next_goal()
        assert goal is not None and evaluation.next_goal() is None
        arm = blind_arm()
        record = asyncio.run(arm.protocol.run(ArmGoal(goal.key, goal.episode, goal.max_steps, goal.view, goal.suite,
                                                      goal.suite_options, goal.policy_type, goal.policy_options)))
        assert record.infra_failure == GAVE_UP, record
        assert record.steps == 0 and not record.success and record.failure_reason == "", record
        assert record.progress is None and record.failure_class is None, record
        assert record.extra["stopped_by"].startswith("policy gave up"), record.extra
        # The operator is told, and not asked for a verdict on what the policy never did.
        assert arm.lines("not a result, no verdict needed") and not arm.lines("verdict episode"), arm.said
        assert evaluation.finish(record) == {} and evaluation.failed == 1
    finally:
        evaluation.run_dir.close()
    assert not (tmp_path / "episodes.jsonl").exists() or not (tmp_path / "episodes.jsonl").read_text()
    resumed = TopicEvaluation(cfg)  # the next run of the plan
    try:
        assert resumed.todo == [EpisodeKey("prompt_grounded", 1, "none", "standard", 0)]
        (failure,) = resumed.run_dir.infra.outstanding(resumed.results).values()
        assert failure["reason"] == GAVE_UP and failure["kind"] == "node_graph", failure
    finally:
        resumed.run_dir.close()
