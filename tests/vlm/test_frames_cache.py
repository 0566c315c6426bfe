"""Frame sources, sampling and the resumable answer cache."""

import json

import h5py
import numpy as np
import pytest

from sgvla.scene_graph import load_ontology
from sgvla.vlm.cache import AnswerCache
from sgvla.vlm.frames import LiberoFile, Sampling, TaskTable
from sgvla.vlm.tiny import write_annotated_libero_file

ONTOLOGY = load_ontology("libero_spatial")


def test_task_ids_follow_the_paper_table():
    table = TaskTable.load()
    assert table.find("Pick up the black bowl between the plate and the ramekin and place it on the plate") == "0"
    assert table.find("", "pick_up_the_black_bowl_on_the_wooden_cabinet_and_place_it_on_the_plate_demo") == "9"
    assert table.find("stack the bowls", "x") is None


def test_libero_file_reads_upright_images_and_graphs(libero_dir):
    f = LiberoFile(next(libero_dir.glob("pick_up*.hdf5")), ONTOLOGY)
    assert f.task_id == "7" and f.cameras == ("agentview", "robot0_eye_in_hand")
    assert [e.length for e in f.episodes()] == [6, 6]
    stored = h5py.File(f.path)["data/demo_1/obs/agentview_rgb"][[2, 4]]
    np.testing.assert_array_equal(f.images("demo_1", "agentview", [2, 4]), stored[:, ::-1, ::-1])
    graphs = f.references("demo_1", "robot0_eye_in_hand", [0, 5])
    assert len(graphs) == 2 and all(len(g) > 0 for g in graphs)


def test_libero_file_errors(tmp_path):
    path = write_annotated_libero_file(tmp_path / "odd.hdf5", "stack the bowls", demos=1, frames=2)
    with pytest.raises(ValueError, match="--task-id odd=ID"):
        LiberoFile(path, ONTOLOGY)
    assert LiberoFile(path, ONTOLOGY, task_id="3").task_id == "3"
    with h5py.File(path, "a") as h:
        del h["data"].attrs["sgvla_annotation_version"]
    with pytest.raises(ValueError, match="sgvla annotate"):
        LiberoFile(path, ONTOLOGY, task_id="3")
    (tmp_path / "junk.hdf5").write_text("no")
    with pytest.raises(ValueError, match="not a readable HDF5"):
        LiberoFile(tmp_path / "junk.hdf5", ONTOLOGY)


def test_sampling_is_deterministic_and_spread(libero_dir):
    sources = [LiberoFile(p, ONTOLOGY) for p in sorted(libero_dir.glob("*.hdf5"))]
    frames = Sampling(episodes_per_task=1, frames_per_episode=3, seed=4).sample(sources, ["agentview"])
    assert len(frames) == 2 * 3 and {f.task_id for f in frames} == {"7", "8"}
    assert sorted({f.frame for f in frames}) == [0, 2, 5]
    assert frames == Sampling(1, 3, 4).sample(sources, ["agentview"])
    assert len(Sampling(0, 0).sample(sources, ["agentview", "robot0_eye_in_hand"])) == 2 * 2 * 6 * 2


def test_cache_resumes_skips_torn_lines_and_retries_errors(tmp_path):
    path = tmp_path / "a.jsonl"
    with AnswerCache(path) as cache:
        cache.add({"key": "a", "raw": "x", "error": None})
        cache.add({"key": "b", "raw": "", "error": "timed out"})
    with path.open("a") as f:
        f.write('{"key": "c", "raw": "tor')  # a run killed mid-line
    with AnswerCache(path) as cache:
        assert cache.finished("a") and not cache.finished("b") and not cache.finished("c")
        cache.add({"key": "b", "raw": "y", "error": None})
    with AnswerCache(path) as cache:
        assert cache.finished("b") and cache.records["b"]["raw"] == "y"
    assert json.loads(path.read_text().splitlines()[-1])["key"] == "b"


def test_a_cache_of_other_settings_is_refused_with_the_differences(tmp_path):
    path = tmp_path / "answers" / "m.jsonl"
    settings = {"model": "a", "max_new_tokens": 64, "prompt": {"sha": "1"}}
    with AnswerCache(path, settings) as cache:
        cache.add({"key": "a", "raw": "x", "error": None})
    with AnswerCache(path, dict(settings)) as cache:  # the same settings: reused
        assert cache.finished("a")
    with pytest.raises(ValueError, match=r"other settings \(model: a -> b; prompt.sha: 1 -> 2\)"):
        AnswerCache(path, {"model": "b", "max_new_tokens": 64, "prompt": {"sha": "2"}})
    legacy = tmp_path / "answers" / "old.jsonl"
    legacy.write_text('{"key": "a", "raw": "x", "error": null}\n')
    with pytest.raises(ValueError, match="without stored settings"):
        AnswerCache(legacy, settings)
