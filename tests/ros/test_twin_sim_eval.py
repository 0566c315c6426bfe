"""Equivalence on the SO101 twin: its evaluation over topics (`sgvla launch sim_eval` with an so101_twin plan: the
sim_bridge node builds the twin from the reset's suite, task, perturbation and seed, and judges success on the
target bowl; the policy node drives the twin's pick-and-place from the scene topic) gives the same records and
actions as `sgvla eval` in process, for the same seeds, unattended. The plan is one where the graph matters: the
ambiguous prompt, where the standard prompt takes the wrong bowl in task 1 and the graph finds the target; the
three controls (filler, wrong_graph, shuffled_graph) run over topics as in process too. The bowls exchange places
once the target is reached (ambiguous_mid_episode: a mid-episode change, applied by the sim_bridge's twin, recorded
by the policy node's engine at the same step as in process): the live graph follows the target, the graph frozen at
the first step (frozen_graph) sends the policy to the old place."""

import json
import os
import sys

import numpy as np
import pytest
import yaml

from sgvla.paths import REPO_ROOT

pytestmark = [pytest.mark.ros, pytest.mark.sim, pytest.mark.slow, pytest.mark.timeout(900)]

PLAN = {"name": "twin_equivalence", "suite": {"type": "so101_twin", "image_size": 64},
        "policies": [{"type": "prompt_grounded", "tie_break": "first"}], "tasks": [1],
        "perturbations": "ambiguous_mid_episode",
        "modes": ["standard", "scene_graph", "frozen_graph", "filler", "wrong_graph", "shuffled_graph"], "episodes": 1,
        "seed_offset": 2, "max_steps": 300, "workers": 1}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, sim_eval):
    """The plan over topics (recorded) and in process, at once."""
    tmp = tmp_path_factory.mktemp("twin_equivalence")
    config = tmp / "plan.yaml"
    config.write_text(yaml.safe_dump({**PLAN, "output_dir": str(tmp / "inprocess")}))
    env = {**os.environ, "MUJOCO_GL": "egl"}
    logs = sim_eval.run_together({
        "topics": [sys.executable, "-m", "sgvla.cli", "launch", "sim_eval", f"eval_config={config}",
                   f"output_dir={tmp / 'topics'}", "render_images=false", "--record", str(tmp / "bag"),
                   "--domain-id", str(sim_eval.domain_ids(1)[0])],
        "inprocess": [sys.executable, str(REPO_ROOT / "tests/ros/inprocess_episodes.py"), str(config),
                      str(tmp / "inprocess.npz")],
    }, env, timeout_s=800)
    return tmp, np.load(tmp / "inprocess.npz"), logs


def test_twin_over_topics_and_in_process_give_identical_episodes(runs, sim_eval):
    tmp, inproc, logs = runs
    expected = json.loads(str(inproc["records"]))
    got = [json.loads(line) for line in (tmp / "topics" / "episodes.jsonl").read_text().splitlines()]
    assert len(expected) == len(got) == 6
    bag = sim_eval.bag_messages(tmp / "bag")
    sim_eval.assert_same_episodes(expected, got, inproc, bag)
    # Reset with the episode's seed and perturbation: the ambiguous prompt reached the twin's task topic.
    assert {m.data for m in bag["/task"]} == {"pick up the black bowl and place it on the stove"}
    by_mode = {r["mode"]: r for r in got}
    assert all(r["seed"] == 2 and r["perturbation_applied"].startswith("prompt 'pick up the black bowl and place")
               for r in got)
    outcome = {mode: (r["success"], r["decision_target"], r["decision_grounding_source"]) for mode, r in by_mode.items()}
    # The standard prompt and the filler leave a tie, which `tie_break: first` breaks for the nearer, wrong bowl (the
    # episode runs to its limit); the graph finds the target; the wrong graph's false facts point at the other bowl.
    assert by_mode["standard"]["steps"] == 300
    assert outcome["standard"] == outcome["filler"] == (False, "black_bowl_2", "fallback")
    assert outcome["scene_graph"] == (True, "black_bowl_1", "scene_graph")
    assert outcome["wrong_graph"] == (False, "black_bowl_2", "scene_graph")
    # The swap once the target was reached, at the same step over topics as in process (assert_same_episodes): the
    # live graph re-grounds on the target where it went, the frozen one on the look-alike at the target's old place.
    swapped = {mode: r["mid_episode_steps"] for mode, r in by_mode.items()}
    assert swapped["scene_graph"] == swapped["frozen_graph"] == [by_mode["scene_graph"]["stages"]["reached"]]
    assert swapped["standard"] == swapped["wrong_graph"] == [None]  # the target never reached: nothing changed
    assert outcome["frozen_graph"] == (False, "black_bowl_2", "scene_graph")
    assert by_mode["frozen_graph"]["failure_class"] == "wrong_object"
    assert by_mode["scene_graph"]["decision_regrounded"] == by_mode["frozen_graph"]["decision_regrounded"] == 1
    assert {mode: r.get("control_kind", "") for mode, r in by_mode.items()} == {
        "standard": "", "scene_graph": "", "frozen_graph": "frozen_graph", "filler": "filler",
        "wrong_graph": "wrong_graph", "shuffled_graph": "shuffled_graph"}
    filler = by_mode["filler"]
    assert filler["control_tokens"] == filler["control_matched_tokens"] and filler["control_counter"] == "words"
    assert by_mode["wrong_graph"]["control_shown"] > 0 and "target_black_bowl" in by_mode["wrong_graph"]["prompt"]
    assert "table.md" in logs["topics"] or (tmp / "topics" / "table.md").is_file()
