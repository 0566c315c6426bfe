"""The scripted expert solves a task; its demos are LIBERO-layout HDF5 that `sgvla annotate` annotates
without touching the original; both resume after an interruption."""

import hashlib
import json

import h5py
import numpy as np
import pytest

from sgvla.libero.hdf5 import DATA, OBJECTS_ATTR, VERSION_ATTR, demo_names, partial_path

pytestmark = pytest.mark.sim


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory, backends):
    from sgvla.libero.demos import generate_task

    backends(0)  # scene built once for the session; generate_task builds its own
    out = tmp_path_factory.mktemp("demos") / "task0_demo.hdf5"
    return generate_task(0, 1, out, render_profile="fast", image_size=64, progress=False)


def test_expert_solves_task_with_prompt_blind_controller(backends):
    from sgvla.libero.expert import PickPlaceController, task_expert

    backend = backends(9, render_images=False)  # the bowl on top of the cabinet
    backend.reset(seed=2)
    expert = task_expert(backend.task_info.problem)
    assert isinstance(expert.controller, PickPlaceController)
    done = success = False
    while not done:
        _, success, done = backend.step(expert.act(backend.scene()))
    assert success and backend.steps < backend.max_steps


def test_demo_layout(demo_file):
    with h5py.File(demo_file, "r") as f:
        data = f[DATA]
        assert demo_names(data) == ["demo_0"] and data.attrs["num_demos"] == 1
        info = json.loads(data.attrs["problem_info"])
        assert info["language_instruction"] == "pick up the black bowl between the plate and the ramekin and place it on the plate"
        demo = data["demo_0"]
        t = int(demo.attrs["num_samples"])
        assert t == data.attrs["total"] and 40 < t < 280
        assert demo["actions"].shape == (t, 7) and demo["states"].shape[0] == t
        assert demo["obs/agentview_rgb"].shape == demo["obs/eye_in_hand_rgb"].shape == (t, 64, 64, 3)
        assert demo["obs/ee_states"].shape == (t, 6) and demo["robot_states"].shape == (t, 9)
        assert demo["dones"][-1] == 1 and demo["dones"][:-1].sum() == 0
        assert "<mujoco" in demo.attrs["model_file"]


def test_annotate_writes_graphs_and_keeps_the_input(demo_file, tmp_path):
    from sgvla.cli import main
    from sgvla.libero.annotate import graph_stats

    before = digest(demo_file)
    out = tmp_path / "annotated.hdf5"
    assert main(["annotate", str(demo_file), "--out", str(out)]) == 0
    assert digest(demo_file) == before and not partial_path(out).exists()
    with h5py.File(out, "r") as f, h5py.File(demo_file, "r") as src:
        data = f[DATA]
        objects = json.loads(data.attrs[OBJECTS_ATTR])
        assert data.attrs[VERSION_ATTR] == "1" and len(objects) == 7
        obs, t = data["demo_0/obs"], data["demo_0"].attrs["num_samples"]
        np.testing.assert_array_equal(obs["agentview_rgb"][()], src["data/demo_0/obs/agentview_rgb"][()])
        assert obs["object_positions"].shape == (t, 7, 3) and obs["object_positions"].dtype == np.float64
        for view in ("agentview", "robot0_eye_in_hand"):
            boxes = obs[f"{view}_boxes"][()]
            assert boxes.shape == (t, 7, 4) and boxes.dtype == np.int32
            graphs = [json.loads(g) for g in obs[f"{view}_scene_graph"].asstr()[()]]
            assert len(graphs) == t and all(g == sorted(g, key=lambda x: (x[0], x[2], x[1])) for g in graphs)
            visible = (boxes[..., 0] >= 0).sum(1)
            assert all(len(g) == n * (n - 1) for g, n in zip(graphs, visible))
            assert ((boxes == -1).all(-1) | (boxes >= 0).all(-1)).all()
        assert len(json.loads(obs["agentview_scene_graph"].asstr()[0])) == 42
    stats = graph_stats(out)
    assert stats.frames == t and stats.triplets_per_frame["agentview"] > stats.triplets_per_frame["robot0_eye_in_hand"]


def test_annotate_resumes_and_replaces_in_place(demo_file, tmp_path):
    import shutil

    from sgvla.libero.annotate import annotate_file

    copy = tmp_path / "copy.hdf5"
    shutil.copyfile(demo_file, copy)
    with h5py.File(copy, "a") as f:  # a second demo, then an interrupted run: demo_0 done, demo_1 half-written
        f.copy(f["data/demo_0"], "data/demo_1")
    shutil.copyfile(copy, partial_path(copy))
    with h5py.File(partial_path(copy), "a") as f:
        f["data/demo_0"].attrs["sgvla_annotated"] = "1"
        f["data/demo_1/obs"].create_dataset("agentview_scene_graph", data=[b"[]"])
    annotate_file(copy, copy, progress=False)
    with h5py.File(copy, "r") as f:
        assert "agentview_scene_graph" not in f["data/demo_0/obs"]  # trusted as done by the interrupted run
        assert len(f["data/demo_1/obs/agentview_scene_graph"]) == f["data/demo_1"].attrs["num_samples"]


def test_annotate_without_model_uses_the_task_file(demo_file, tmp_path):
    from sgvla.libero.annotate import annotate_file

    bare = tmp_path / "pick_up_the_black_bowl_between_the_plate_and_the_ramekin_and_place_it_on_the_plate_demo.hdf5"
    with h5py.File(demo_file, "r") as src, h5py.File(bare, "w") as f:
        f.create_dataset("data/demo_0/states", data=src["data/demo_0/states"][:5])
    annotate_file(bare, tmp_path / "out.hdf5", image_size=128, progress=False)
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        assert f["data/demo_0/obs/agentview_boxes"].shape == (5, 7, 4)


def test_demo_generation_resumes(demo_file, tmp_path):
    import shutil

    from sgvla.libero.demos import generate_task

    out = tmp_path / "task0_demo.hdf5"
    shutil.copyfile(demo_file, partial_path(out))
    with h5py.File(partial_path(out), "a") as f:
        f["data"].create_group("demo_1")  # half-written when the run was interrupted
    with pytest.raises(RuntimeError, match="only 1 successful episodes in 1 seeds"):
        generate_task(0, 2, out, render_profile="fast", image_size=64, max_attempts=1, progress=False)
    with h5py.File(partial_path(out), "r") as f:
        assert demo_names(f["data"]) == ["demo_0"]  # the finished demo kept, the broken one dropped


def test_relation_rules_read_libero_task_language(tmp_path):
    """Official files carry the BDDL sentence ("top layer"); the drawer rule needs the task's ("top drawer")."""
    from sgvla.libero.annotate import task_text

    path = tmp_path / "x.hdf5"
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["problem_info"] = json.dumps({"language_instruction": "Pick the akita black bowl in the top layer"})
        data.attrs["bddl_file_name"] = ("libero/libero/bddl_files/libero_spatial/pick_up_the_black_bowl_in_the_top_drawer"
                                        "_of_the_wooden_cabinet_and_place_it_on_the_plate.bddl")
        assert "in the top drawer" in task_text(data, path)
        del data.attrs["bddl_file_name"]
        assert task_text(data, path) == "Pick the akita black bowl in the top layer"
