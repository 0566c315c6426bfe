"""The main job answers its question: a policy entry may run a part of the plan (the privileged expert as a sanity
arm on few episodes), the progress bar counts each policy apart, and the run closes with what it found: the scene
graph's effect on each policy under test with the Holm p of the report's comparisons, and the next plans."""

import pytest

import sgvla.plugins  # noqa: F401
from sgvla.core.config import ConfigError, from_mapping, load_config
from sgvla.eval.config import EvalConfig
from sgvla.eval.finding import NEXT_PLANS, finding
from sgvla.eval.order import plan
from sgvla.eval.report import SequentialPlan, comparisons
from sgvla.eval.runner import progress_counts
from sgvla.paths import CONFIG_DIR

BASE = dict(suite={"type": "libero_spatial"}, tasks=[0, 1, 2], modes=["standard", "scene_graph"], episodes=3,
            perturbations="ambiguous_prompt")


def test_a_policy_runs_its_part_of_the_plan_in_whole_blocks():
    cfg = from_mapping(EvalConfig, {**BASE, "policies": [{"type": "prompt_grounded"},
                                                          {"type": "expert", "max_tasks": 2, "max_episodes": 1}]})
    keys = plan(cfg)
    expert = {(k.task_id, k.seed, k.mode) for k in keys if k.policy == "expert"}
    assert expert == {(t, 0, m) for t in (0, 1) for m in ("standard", "scene_graph")}
    assert sum(k.policy == "prompt_grounded" for k in keys) == 3 * 3 * 2
    stored = SequentialPlan.of({"episodes": 3, "tasks": [0, 1, 2], "policies": [
        {"type": "prompt_grounded"}, {"type": "expert", "max_tasks": 2, "max_episodes": 1}]})
    assert stored.planned(True, "prompt_grounded") == 9 and stored.planned(True, "expert") == 2
    assert stored.planned(False, "expert") == 1 and stored.planned(False, "prompt_grounded") == 3
    # the plan's tasks overridden (tasks=[2]): the part is at most what the plan has
    alone = from_mapping(EvalConfig, {**BASE, "tasks": [2], "episodes": 1,
                                      "policies": [{"type": "expert", "max_tasks": 2, "max_episodes": 3}]})
    assert [(k.task_id, k.seed) for k in plan(alone)] == [(2, 0), (2, 0)]


@pytest.mark.parametrize("part", [{"max_tasks": 0}, {"max_episodes": -1}])
def test_a_part_of_nothing_is_refused_at_load(part):
    (key, value), = part.items()
    with pytest.raises(ValueError, match=f"policy expert: {key} must be >= 1, got {value}"):
        from_mapping(EvalConfig, {**BASE, "policies": [{"type": "expert", **part}]})


def records(policy, wins_by_mode, n=30):
    """n matched blocks; wins_by_mode[mode] = the seeds (block indices) that succeed."""
    return [{"policy": policy, "mode": mode, "task_id": i % 10, "perturbation": "ambiguous_prompt", "seed": i // 10,
             "success": i in wins} for mode, wins in wins_by_mode.items() for i in range(n)]


def test_the_closing_sentences_say_what_was_found_with_the_holm_p():
    half = set(range(0, 30, 2)) | {1, 3, 5}  # 18 of 30
    recs = records("prompt_grounded", {"standard": half, "scene_graph": set(range(30)), "filler": half,
                                       "wrong_graph": set()})
    recs += records("expert", {m: {0, 1} for m in ("standard", "scene_graph", "filler", "wrong_graph")}, n=2)
    said = finding(recs, privileged=["expert"], alpha=0.05)
    holm = {(c.treatment, c.reference): c.p_holm for c in comparisons(recs) if c.policy == "prompt_grounded"}
    assert said[0].startswith("prompt_grounded: the scene graph raised success from 18/30 (standard) to 30/30 "
                              f"(scene_graph), Holm p = {holm['scene_graph', 'standard']:.2g}; significant, and above "
                              "every control (filler 18/30 (Holm p = ")
    assert said[0].endswith("the graph helps by its facts, not its extra words.")
    assert said[1] == "expert (reads the true goal: a sanity check, not a policy under test): 8/8 episodes " \
                      "succeeded (every arm)."
    assert said[2] == "Next: " + "; ".join(NEXT_PLANS) + "."
    weak = finding(records("prompt_grounded", {"standard": half, "scene_graph": half | {7, 9}}), alpha=0.05)
    assert "not significant at alpha = 0.05" in weak[0] and "Holm p = 0.5" in weak[0], weak


def test_the_progress_bar_counts_each_policy_apart():
    cfg = from_mapping(EvalConfig, {**BASE, "policies": [{"type": "prompt_grounded"}, {"type": "expert"}]})
    from collections import Counter
    wins, counts = Counter(), Counter()
    for policy, mode, success in [("prompt_grounded", "standard", 0), ("prompt_grounded", "scene_graph", 1),
                                  ("expert", "standard", 1)]:
        wins[policy, mode] += success
        counts[policy, mode] += 1
    counts["infra"] = 1
    assert progress_counts(cfg, wins, counts) == "prompt_grounded: std 0/1 sg 1/1 | expert: std 1/1 | infra 1"


def test_the_main_job_compares_enough_blocks_and_keeps_the_expert_apart():
    cfg = load_config(EvalConfig, CONFIG_DIR / "eval" / "default.yaml")
    keys = plan(cfg)
    under_test = [p for p in cfg.policies if not p.reads_goal]
    assert [p.type for p in under_test] == ["prompt_grounded"] and {"filler", "wrong_graph"} <= set(cfg.modes)
    blocks = {(k.task_id, k.seed) for k in keys if k.policy == "prompt_grounded"}
    assert len(blocks) >= 30  # with 18/30 vs 30/30 the exact McNemar p is 4.9e-4: significant after Holm
    sanity = [k for k in keys if k.policy == "expert"]
    assert 0 < len(sanity) <= len(keys) // 10
    for tasks in ([3], [9, 1]):  # the plan's tasks overridden: the sanity arm still has its part
        overridden = plan(load_config(EvalConfig, CONFIG_DIR / "eval" / "default.yaml", {"tasks": tasks}))
        assert {k.task_id for k in overridden if k.policy == "expert"} == set(tasks)
    with pytest.raises(ConfigError):
        load_config(EvalConfig, CONFIG_DIR / "eval" / "default.yaml",
                    {"policies": [{"type": "expert", "max_episodes": 0}]})
