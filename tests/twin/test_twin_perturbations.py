"""The SO101 twin's perturbation sets as data: loaded and checked against the twin's tasks, applied to layouts
before the scene is built, and judged on the target bowl only."""

import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from sgvla.so101.hardware.joints import JOINTS  # noqa: E402
from sgvla.so101.twin.backend import TwinBackend  # noqa: E402
from sgvla.so101.twin.config import load_twin_config  # noqa: E402
from sgvla.so101.twin.perturbations import (  # noqa: E402
    PerturbationError, available_perturbations, load_perturbations, parse_perturbations,
)
from sgvla.so101.twin.pick_place import TwinPickPlace  # noqa: E402

SHIPPED = ["none", "ambiguous_mid_episode", "ambiguous_prompt", "distractor_added", "mid_episode",
           "spatial_referring", "support_moved", "swapped_bowls"]


@pytest.fixture(scope="module")
def config():
    return load_twin_config()


def test_shipped_sets_load_and_change_what_they_say(config):
    assert available_perturbations() == SHIPPED
    sets = {name: load_perturbations(name) for name in SHIPPED}
    assert all(sets["none"].layout(config, t) == config.task(t) for t in range(5))
    ambiguous = [sets["ambiguous_prompt"].layout(config, t) for t in range(5)]
    assert [a.prompt for a in ambiguous] == ["pick up the black bowl and place it on the stove"] * 3 + [
        "pick up the black bowl and place it on the cookie box"] * 2
    assert all(a.layout == config.task(t).layout for t, a in enumerate(ambiguous))
    swapped = sets["swapped_bowls"].layout(config, 0)  # the target stood on the drawer: now the other bowl does
    assert swapped.stands_on == {"black_bowl_2": "red_drawer"}
    assert swapped.layout["black_bowl_1"] == config.task(0).layout["black_bowl_2"]
    moved = sets["support_moved"].layout(config, 0)
    assert moved.layout["red_drawer"] == [0.19, 0.14] and moved.table_position("black_bowl_1") == [0.19, 0.14]
    added = sets["distractor_added"].layout(config, 1)
    assert "white_plate" in added.objects and "white_plate" not in config.task(1).objects
    assert sets["swapped_bowls"].for_task(2).describe() == "swap black_bowl_1<->black_bowl_2"


@pytest.mark.parametrize("tasks, message", [
    ({0: {"prompt": "pick up the black bowl and place it on the plate"}},
     "task 0: key 'prompt': does not mention 'stove'"),
    ({0: {"remove": ["black_bowl_1"]}}, "task 0: key 'remove': 'black_bowl_1' is a goal object"),
    ({0: {"remove": ["red_drawer"]}}, "task 0: key 'remove': ['black_bowl_1'] stand on 'red_drawer'"),
    ({1: {"poses": [{"swap": ["black_bowl_1", "white_plate"]}]}},
     "task 1: key 'poses': 'white_plate' is not an object of this scene"),
    ({1: {"poses": [{"move": {"object": "black_stove", "by": [0.0, 0.03]}}]}},
     "task 1: the perturbed layout: black_bowl_1 and black_stove are 1.5 cm apart; they need at least 2.0 cm"),
    ({0: {"poses": [{"move": {"object": "black_bowl_1", "by": [0.0, 0.1]}}]}},
     "'black_bowl_1' stands on 'red_drawer' when it is moved; move its support"),
    ({0: {"add": {"ramekin": [0.3, 0.0]}}}, "task 0: key 'add': unknown object 'ramekin'; the twin's objects are"),
    ({0: {"add": {"cookie": [0.3, 0.0]}}}, "task 0: key 'add': 'cookie' is already in this task's scene"),
    ({0: {"colour": "red"}}, "task 0: key 'colour': unknown key; allowed: ['add', 'during', 'poses', 'prompt', 'remove']"),
    ({7: {}}, "task 7: unknown task id; valid ids are [0, 1, 2, 3, 4]"),
])
def test_a_bad_set_is_refused_naming_file_task_and_problem(config, tasks, message):
    with pytest.raises(PerturbationError) as error:
        parse_perturbations({"name": "bad", "tasks": tasks}, config, source="bad.yaml")
    assert str(error.value).startswith("bad.yaml: ") and message in str(error.value)


def test_unknown_set_names_the_available_ones():
    with pytest.raises(FileNotFoundError, match=r"unknown so101_twin perturbation set 'table7'; available: \['none', "):
        load_perturbations("table7")


def test_backend_builds_the_perturbed_scene_and_records_it():
    backend = TwinBackend(0, render_images=False, perturbation="swapped_bowls")
    try:
        backend.reset(3)
        scene = backend.scene()
        # The target now stands on the table where the other bowl stood; the other bowl is on the drawer.
        assert scene.position("black_bowl_1")[2] < 0.01 < scene.position("black_bowl_2")[2]
        assert backend.record_facts() == {"perturbation_applied": "swap black_bowl_1<->black_bowl_2"}
        assert backend.episode_info()["goal"] == ("black_bowl_1", "black_stove")
    finally:
        backend.close()


def test_the_other_bowl_on_the_place_object_is_no_success(config):
    """Success is judged on the target bowl only: the other, identical bowl carried onto the stove fails."""
    backend = TwinBackend(1, render_images=False)
    twin = backend.twin
    try:
        twin.reset(0)
        controller = TwinPickPlace(twin.model, twin.config, "black_bowl_2", "black_stove")
        for _ in range(300):
            twin.set_joint_targets(dict(zip(JOINTS, controller.act(twin.scene()))))
            twin.advance(twin.control_period)
            assert not twin.success()
            if controller.done:
                break
        scene = twin.scene()
        assert controller.done and np.linalg.norm((scene.position("black_bowl_2") - scene.position("black_stove"))[:2]) < 0.04
    finally:
        backend.close()
