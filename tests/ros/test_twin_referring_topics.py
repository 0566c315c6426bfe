"""Spatially-referring instructions over topics (issue 42.4): `sgvla launch so101_eval sim=true` (sim_eval's nodes on
a twin plan) under `spatial_referring` gives the records and actions `sgvla eval` gives in process. The sim_bridge's
backend words the program at its reset (the task topic carries it), its reset facts carry the family and the
program into the policy node's records, and prompt_grounded resolves the program from the injected graph
(scene_graph) and guesses without one (standard)."""

import pytest

from sgvla.core.referring import FAMILY_KEY, PROGRAM_KEY, load_vocabulary

pytestmark = [pytest.mark.ros, pytest.mark.sim, pytest.mark.slow, pytest.mark.timeout(900)]

PLAN = {"name": "twin_referring", "suite": {"type": "so101_twin", "image_size": 64},
        "policies": [{"type": "prompt_grounded", "tie_break": "first"}], "tasks": [0],
        "perturbations": "spatial_referring", "modes": ["standard", "scene_graph"], "episodes": 1,
        "seed_offset": 1, "max_steps": 300, "workers": 1}


def test_twin_referring_over_topics_equals_in_process(tmp_path, sim_eval):
    got, bag = sim_eval.run_both(tmp_path, PLAN)
    by_mode = {r["mode"]: r for r in got}
    task = by_mode["scene_graph"]["task"]
    program, place = load_vocabulary().parse(task, "so101_tabletop")
    assert {m.data for m in bag["/task"]} == {task} and place == "stove"
    assert {r[PROGRAM_KEY] for r in got} == {str(program)} and len({r[FAMILY_KEY] for r in got}) == 1
    assert by_mode["scene_graph"]["decision_grounding_source"] == "scene_graph"
    assert by_mode["scene_graph"]["decision_target"] == "black_bowl_1" and by_mode["scene_graph"]["success"]
    assert by_mode["standard"]["decision_grounding_source"] == "fallback"
    assert "no scene graph to evaluate it on" in by_mode["standard"]["decision_grounding_evidence"]
