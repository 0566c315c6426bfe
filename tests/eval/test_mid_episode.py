"""Mid-episode perturbations (issue 42): sets that declare changes fired during an episode load, and bad ones are
refused at load naming file, task and problem; on the real LIBERO simulator a bowl swap once the target is reached
fires at that step, is recorded by the engine at the step the backend applied it, and the prompt-grounded policy
follows the target with the live graph (scene_graph) and goes to the old place with the first step's graph
(frozen_graph); a step trigger fires at its step and moves what it says."""

import numpy as np
import pytest
import yaml

import sgvla.plugins  # noqa: F401  (registers suites, policies, context modes)
from sgvla.core.config import from_mapping
from sgvla.core.context import ContextMode
from sgvla.core.mid_episode import MidEpisodeWatch, Trigger, triggers_of, triggers_text
from sgvla.core.perturbation_files import PerturbationError
from sgvla.scene_graph import Graph, Triplet, ViewGraph, load_ontology

SWAP = {"when": "reached", "poses": [{"swap": ["akita_black_bowl_1", "akita_black_bowl_2"]}]}


def test_shipped_mid_episode_sets_load():
    from sgvla.libero.perturbations import load_perturbations
    from sgvla.so101.twin.perturbations import load_perturbations as load_twin

    libero = load_perturbations("mid_episode")
    assert all(libero.for_task(t).triggers == "reached" for t in range(10))
    assert libero.for_task(3).describe() == "at reached: swap akita_black_bowl_1<->akita_black_bowl_2"
    for name in ("mid_episode", "ambiguous_mid_episode"):
        twin = load_twin(name)
        assert all(twin.for_task(t).during[0].describe() == "at reached: swap black_bowl_1<->black_bowl_2"
                   for t in range(5))
    assert triggers_of(triggers_text([Trigger(stage="grasped"), Trigger(step=40)])) == (
        Trigger(stage="grasped"), Trigger(step=40))


@pytest.mark.parametrize("change, message", [
    ({**SWAP, "when": "touched"}, "key 'during': unknown stage 'touched'; a change fires at one of ['reached'"),
    ({**SWAP, "when": "placed"}, "unknown stage 'placed'"),  # success: the episode is over
    ({**SWAP, "when": {"step": 0}}, "step must be a positive integer"),
    ({**SWAP, "when": {"steps": 3}}, "'when' is a stage"),
    ({"poses": SWAP["poses"]}, "each change is a mapping with 'when'"),
    ({**SWAP, "colour": "red"}, "unknown key 'colour'; a change has ['poses', 'remove', 'when']"),
    ({"when": "reached"}, "the change at reached changes nothing"),
    ({"when": "reached", "remove": ["plate_1"]}, "cannot remove 'plate_1': it is a goal object"),
    ({"when": "reached", "poses": [{"swap": ["akita_black_bowl_1", "wooden_cabinet_1"]}]},
     "'wooden_cabinet_1' is not a movable object"),
])
def test_bad_libero_changes_fail_at_load(tmp_path, change, message):
    from sgvla.libero.perturbations import load_perturbations

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "bad", "tasks": {0: {"during": [change]}}}))
    with pytest.raises(PerturbationError) as err:
        load_perturbations(path)
    assert str(err.value).startswith(f"{path}: task 0: key 'during': ") and message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("change, message", [
    ({"when": "grasped", "remove": ["black_bowl_1"]}, "cannot remove 'black_bowl_1': a goal object"),
    ({"when": "grasped", "remove": ["red_drawer"]}, "cannot remove 'red_drawer': objects stand on it"),
    ({"when": {"step": 2.5}, "remove": ["black_stove"]}, "step must be a positive integer"),
])
def test_bad_twin_changes_fail_at_load(tmp_path, change, message):
    from sgvla.so101.twin.perturbations import load_perturbations

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "bad", "tasks": {0: {"during": [change]}}}))
    with pytest.raises(PerturbationError, match=f"task 0: key 'during': {message}"):
        load_perturbations(path)


def test_frozen_graph_keeps_the_first_steps_graph_until_reset():
    ontology = load_ontology("libero_spatial")
    target = ontology.manipulated
    first = ViewGraph("agentview", Graph((Triplet(target, "is_left_of", "plate_1"),)), {})
    later = ViewGraph("agentview", Graph((Triplet(target, "is_right_of", "plate_1"),)), {})
    live, frozen = ContextMode.choice("scene_graph")(), ContextMode.choice("frozen_graph")()
    frozen.reset()
    at_start = frozen.context("task", first, "agentview", ontology)
    assert at_start.prompt == live.context("task", first, "agentview", ontology).prompt
    assert frozen.context("task", later, "agentview", ontology).prompt == at_start.prompt != live.context(
        "task", later, "agentview", ontology).prompt
    frozen.reset()  # the next episode starts from its own first graph
    assert frozen.context("task", later, "agentview", ontology).prompt == live.context(
        "task", later, "agentview", ontology).prompt
    assert ContextMode.choice("frozen_graph").control  # the report compares scene_graph with it


def _worker(tmp_path, **plan):
    from sgvla.eval.config import EvalConfig
    from sgvla.eval.runner import Worker

    cfg = from_mapping(EvalConfig, {"suite": {"type": "libero_spatial", "render_profile": "fast", "image_size": 64},
                                    "tasks": [0], "episodes": 1, "output_dir": str(tmp_path), **plan})
    return cfg, Worker(cfg)


@pytest.mark.sim
@pytest.mark.slow
def test_bowl_swap_once_reached_live_graph_follows_frozen_does_not(tmp_path):
    pytest.importorskip("sgvla.libero.env", reason="the LIBERO backend is not available")
    from sgvla.eval.runner import plan

    cfg, worker = _worker(tmp_path, policies=[{"type": "prompt_grounded"}], perturbations="mid_episode",
                          modes=["scene_graph", "frozen_graph"])
    live, frozen = (worker.run(key) for key in plan(cfg))
    for r in (live, frozen):  # the swap fired once the target was reached, and the engine recorded that step
        assert r["mid_episode_triggers"] == "reached" and r["mid_episode_steps"] == [r["stages"]["reached"]]
        assert r["perturbation_applied"] == "at reached: swap akita_black_bowl_1<->akita_black_bowl_2"
        assert r["decision_regrounded"] == 1 and r["decision_grounding_source"] == "scene_graph"
    assert live["mid_episode_steps"] == frozen["mid_episode_steps"]  # the same start: the same approach
    assert live["success"] and live["decision_target"] == "akita_black_bowl_1"
    assert not frozen["success"] and frozen["decision_target"] == "akita_black_bowl_2"
    assert frozen["failure_class"] == "wrong_object" and "grasped" not in frozen["stages"]


@pytest.mark.sim
def test_step_trigger_moves_and_removes_at_its_step(tmp_path):
    pytest.importorskip("sgvla.libero.env", reason="the LIBERO backend is not available")
    from sgvla.libero.env import make_backend
    from sgvla.libero.perturbations import PARKED_AT, parse_perturbations
    from sgvla.libero.tasks import task_info

    change = {"when": {"step": 3}, "poses": [{"move": {"object": "akita_black_bowl_1", "by": [0.0, 0.08, 0.0]}}],
              "remove": ["cookies_1"]}
    pset = parse_perturbations({"name": "t", "tasks": {0: {"during": [change]}}}, {0: task_info(0).problem})
    with make_backend(0, perturbation=pset, render_images=False, render_profile="fast", image_size=64) as backend:
        backend.reset(0)
        start = {n: backend.scene().position(n).copy() for n in ("akita_black_bowl_1", "cookies_1")}
        hold = np.zeros(7)
        for step in range(3):
            backend.step(hold)
            assert backend.mid_episode.fired == [None]  # steps 0, 1, 2: not yet
        assert np.allclose(backend.scene().position("akita_black_bowl_1"), start["akita_black_bowl_1"], atol=0.005)
        backend.step(hold)  # the change fires at the scene of step 3, before the 4th action
        assert backend.mid_episode.fired == [3]
        scene = backend.scene()
        moved = scene.position("akita_black_bowl_1") - start["akita_black_bowl_1"]
        assert abs(moved[1] - 0.08) < 0.01 and abs(moved[0]) < 0.01
        assert np.linalg.norm(scene.position("cookies_1")[:2] - PARKED_AT[:2]) < 0.05
        assert "cookies_1" not in backend.ground_truth(["agentview"], scene=scene)["agentview"].boxes
        assert backend.record_facts()["mid_episode_triggers"] == "step 3"


def test_watch_fires_each_trigger_once_at_its_first_scene():
    from sgvla.libero.stages import PANDA_STAGES

    watch = MidEpisodeWatch([Trigger(step=2), Trigger(step=2), Trigger(stage="reached")], PANDA_STAGES,
                            ("akita_black_bowl_1", "plate_1"))
    assert watch.observe(0, None) == [] and watch.observe(1, None) == []
    assert watch.observe(2, None) == [0, 1] and watch.observe(3, None) == []
    assert watch.fired == [2, 2, None] and watch.pending
