"""Perturbation files: the shipped sets load, user files work, bad entries name file, task and key."""

import pytest
import yaml

from sgvla.libero.bddl import BddlProblem
from sgvla.libero.perturbations import Move, PerturbationError, Swap, available_perturbations, load_perturbations
from sgvla.libero.tasks import num_tasks, task_info

pytestmark = pytest.mark.sim


def test_shipped_sets():
    assert {"none", "full_graph", "table7"} <= set(available_perturbations())
    none, full, table7 = (load_perturbations(n) for n in ("none", "full_graph", "table7"))
    assert none.tasks == {} and none.subject_filter == "akita_black_bowl_1" and full.subject_filter is None
    assert table7.subject_filter == "akita_black_bowl_1"
    assert table7.for_task(4).remove == ("cookies_1", "glazed_rim_porcelain_ramekin_1")
    assert table7.for_task(8).remove == ("glazed_rim_porcelain_ramekin_1", "cookies_1")
    assert table7.for_task(0).prompt == "pick up the black bowl in front of the ramekin and place it on the plate"
    assert table7.for_task(7).prompt == "pick up the black bowl behind the wooden cabinet and place it on the plate"
    assert table7.for_task(2).cameras == table7.for_task(6).cameras == ("frontview", "robot0_robotview")
    assert table7.for_task(5).poses == (
        Swap("cookies_1", "glazed_rim_porcelain_ramekin_1"), Swap("akita_black_bowl_1", "akita_black_bowl_2"),
        Move("akita_black_bowl_1", (0.0, 0.0, 0.05)), Move("plate_1", (-0.05, -0.45, 0.5)))
    assert table7.for_task(9).poses[-1] == Move("akita_black_bowl_2", (0.0, -0.1, 0.0))
    assert len(table7.for_task(1).poses) == 4 and len(table7.for_task(3).poses) == 2


def test_user_file_without_code_changes(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"subject_filter": None, "tasks": {3: {
        "poses": [{"move": {"object": "plate_1", "by": [0.0, 0.05, 0.0], "jitter": [0.01, 0.01, 0.0]}}],
        "settle_steps": 50}}}))
    loaded = load_perturbations(path)
    assert loaded.name == "mine" and loaded.for_task(3).settle_steps == 50
    assert loaded.for_task(0).poses == ()


@pytest.mark.parametrize("tasks, message", [
    ({11: {}}, "task 11"),
    ({4: {"remove": ["akita_black_bowl_1"]}}, "task 4: key 'remove': 'akita_black_bowl_1' is a goal object"),
    ({3: {"remove": ["cookies_1"]}}, "task 3: key 'remove': 'cookies_1' supports goal object"),
    ({0: {"remove": ["teapot_1"]}}, "task 0: key 'remove': unknown object 'teapot_1'"),
    ({0: {"remove": ["flat_stove_1"]}}, "task 0: key 'remove': 'flat_stove_1' is a fixture"),
    ({0: {"prompt": "pick up the black bowl and put it down"}}, "task 0: key 'prompt'"),
    ({2: {"cameras": ["frontview", "ceiling"]}}, "task 2: key 'cameras': unknown camera 'ceiling'"),
    ({1: {"poses": [{"swap": ["akita_black_bowl_1", "wooden_cabinet_1"]}]}}, "task 1: key 'poses'"),
    ({1: {"poses": [{"move": {"object": "plate_1", "by": [0, 0]}}]}}, "task 1: key 'poses': must be three numbers"),
    ({8: {"remove": ["cookies_1"], "poses": [{"swap": ["cookies_1", "plate_1"]}]}}, "task 8: key 'poses'"),
    ({5: {"colour": "red"}}, "task 5: key 'colour': unknown key"),
])
def test_bad_entries_name_task_and_key(tmp_path, tasks, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"tasks": tasks}))
    with pytest.raises(PerturbationError) as err:
        load_perturbations(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_unknown_set_and_key(tmp_path):
    with pytest.raises(FileNotFoundError, match="available"):
        load_perturbations("no_such_set")
    path = tmp_path / "bad.yaml"
    path.write_text("subject: akita_black_bowl_1\n")
    with pytest.raises(PerturbationError, match="key 'subject'"):
        load_perturbations(path)


def test_task_files_and_object_removal():
    problems = [task_info(t).problem for t in range(num_tasks())]
    assert all(p.goal_placements == (("akita_black_bowl_1", "plate_1"),) for p in problems)
    drawer = task_info(4).problem
    assert drawer.supports("akita_black_bowl_1") == ["wooden_cabinet_1", "main_table"]
    reduced = BddlProblem.parse(drawer.without({"cookies_1", "glazed_rim_porcelain_ramekin_1"}))
    assert set(reduced.objects) == {"akita_black_bowl_1", "akita_black_bowl_2", "plate_1"}
    assert reduced.goal_placements == drawer.goal_placements and reduced.fixtures == drawer.fixtures
    assert "cookies_1" not in reduced.placements and reduced.language == drawer.language
    with pytest.raises(ValueError, match="unknown LIBERO-Spatial task id|unknown libero_spatial task id"):
        task_info(10)
