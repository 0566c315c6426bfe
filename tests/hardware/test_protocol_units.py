"""Pure parts of the operator's protocol on the arm (sgvla.so101.hardware.protocol) and the so101_hardware suite's
plan checks."""

import pytest

import sgvla.plugins  # noqa: F401
from sgvla.core.config import ConfigError, load_config
from sgvla.core.episode import EpisodeKey
from sgvla.eval.config import EvalConfig
from sgvla.eval.runner import check_in_process, plan
from sgvla.paths import REPO_ROOT
from sgvla.so101.hardware.joints import JOINTS
from sgvla.so101.hardware.protocol import (
    OperatorInputError,
    home_error,
    home_goal,
    parse_confirm,
    parse_keyboard,
    parse_verdict,
    scene_card,
)
from sgvla.so101.hardware.safety import SafetyConfig

PLAN = REPO_ROOT / "config/eval/so101_hardware.yaml"


def test_verdicts_and_confirmations_parse_or_say_what_is_valid():
    v = parse_verdict("  Failure dropped the bowl near the stove ")
    assert (v.outcome, v.note, v.source, v.success) == ("failure", "dropped the bowl near the stove", "topic", False)
    assert parse_verdict("success", "keyboard").success and parse_verdict("invalid").note == ""
    with pytest.raises(OperatorInputError, match=r"success\|failure\|invalid"):
        parse_verdict("great")
    assert parse_confirm("") == "start" and parse_confirm("START") == "start" and parse_confirm("stop") == "stop"
    with pytest.raises(OperatorInputError, match="start .* stop"):
        parse_confirm("go on")
    assert parse_keyboard("\n") == ("confirm", "start") and parse_keyboard("stop") == ("confirm", "stop")
    kind, verdict = parse_keyboard("invalid scene was wrong\n")
    assert kind == "verdict" and (verdict.outcome, verdict.note, verdict.source) == ("invalid", "scene was wrong",
                                                                                     "keyboard")
    with pytest.raises(OperatorInputError, match="verdict 'yes'"):
        parse_keyboard("yes")


def test_home_goals_move_at_most_the_bound_per_tick_and_stay_inside_the_limits():
    safety = SafetyConfig()
    home = {j: 0.0 for j in JOINTS}
    present = {j: 40.0 for j in JOINTS} | {"shoulder_pan": -1.0}
    goal = home_goal(home, present, safety, step_deg=2.0)
    assert goal == {j: 38.0 for j in JOINTS} | {"shoulder_pan": 0.0}
    assert home_goal(home, present, safety, step_deg=50.0)["elbow_flex"] == 40.0 - safety.max_step  # never above it
    outside = home_goal({"shoulder_pan": 500.0}, {"shoulder_pan": 109.0}, safety, step_deg=5.0)
    assert outside["shoulder_pan"] == pytest.approx(safety.joint_limits["shoulder_pan"][1])
    assert home_error(home, present) == 40.0


def test_the_scene_card_hides_the_mode_when_blind():
    key = EpisodeKey("hold", 2, "none", "scene_graph", 4)
    blind = scene_card(7, key, "put the bowl on the stove", "none", blind=True)
    assert "episode 7" in blind and "task 2" in blind and "seed 4" in blind and "scene_graph" not in blind
    assert "mode scene_graph" in scene_card(7, key, "p", "none", blind=False)


def test_the_hardware_plan_loads_counterbalanced_and_refuses_what_the_arm_cannot_do():
    cfg = load_config(EvalConfig, PLAN, {})
    assert cfg.suite.type == "so101_hardware" and cfg.suite.blind and cfg.order == "counterbalanced"
    assert len(plan(cfg)) == 15 and cfg.suite.max_steps == 900
    prompt, perturbation = cfg.suite.scene_card(1, "swapped_bowls")
    assert "bowl" in prompt and "swap" in perturbation
    with pytest.raises(ValueError, match="runs over the robot's topics"):
        check_in_process(cfg)
    for overrides, message in [({"modes": ["standard", "scene_graph"]}, "no source of.*perception: true.*modes=\\[standard\\]"),
                               ({"policies": [{"type": "prompt_grounded"}]}, "object positions.*perception=true.*hold"),
                               ({"suite.home": {"elbow": 1.0}}, "unknown joint.*elbow_flex"),
                               ({"suite.home": {"elbow_flex": 400.0}}, "outside the joint's limits"),
                               ({"suite.episode_time_s": 0}, "episode_time_s must be > 0")]:
        with pytest.raises(ConfigError, match=message):
            load_config(EvalConfig, PLAN, overrides)
    with_perception = {"suite.perception": True, "modes": ["standard", "scene_graph"],
                       "policies": [{"type": "prompt_grounded"}]}
    with pytest.raises(ConfigError, match="perceives its objects .*use graph_source=fiducial"):
        load_config(EvalConfig, PLAN, with_perception)  # the arm has no simulator graphs
    perceived = load_config(EvalConfig, PLAN, {**with_perception, "graph_source": "fiducial"})
    assert perceived.suite.graph_modes and perceived.suite.knows_objects and perceived.graph_source.perceived
    # LeRobot checkpoints trained on SO101 data run on the arm, chunks computed while the current one plays
    learned = load_config(EvalConfig, PLAN, {"policies": [{"type": "act", "path": "/ckpt/act"}]})
    assert learned.policies[0].learned and learned.suite.lerobot_env_config().chunked
