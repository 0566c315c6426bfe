"""VLM graphs on the SO101 twin (issue 15.5): `sgvla eval` in process with ``graph_source=vlm`` on the twin suite.
The VLM sees the twin's images upright as the twin renders them (the twin stores them upright, LIBERO turned: each
suite's `upright` is the one place they are turned) and is asked in the ``so101_tabletop`` vocabulary."""

import base64
import io
import json

import numpy as np
import pytest
from PIL import Image

from sgvla.cli import main

pytestmark = pytest.mark.sim

SO101_GRAPH = [("black_bowl_1", "is_left_of", "white_plate"), ("white_plate", "is_right_of", "black_bowl_1")]


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def twin_args(out, client) -> list[str]:
    return ["eval", "--quiet", "--out", str(out), "suite={type: so101_twin, image_size: 64}", "tasks=[0]",
            "episodes=1", "modes=[scene_graph]", "max_steps=2", "workers=1", "policies=[{type: prompt_grounded}]",
            "graph_source=vlm", f"graph_source.client={client}", "graph_source.rate_hz=50"]


def test_the_vlm_sees_the_twin_image_upright_and_answers_in_its_vocabulary(tmp_path, stub, monkeypatch):
    from sgvla.so101.twin.backend import TwinBackend

    monkeypatch.setattr(stub, "answer", "\n".join(f"({s}, {r}, {o})" for s, r, o in SO101_GRAPH))
    client = tmp_path / "stub.yaml"
    client.write_text(f"type: openai\nname: stub\nmodel: stub\nbase_url: {stub.url('twin')}\nmax_retries: 0\n")
    out = tmp_path / "run"
    assert main(twin_args(out, client)) == 0
    (record,) = lines(out / "episodes.jsonl")
    assert record["graph_source"] == "vlm" and record["vlm_queries"] >= 1 and record["vlm_failed_queries"] == 0
    assert "(target_black_bowl, is_left_of, white_plate)" in record["prompt"]  # the answer, as the prompt names it
    first = next(body for mode, body in stub.calls if mode == "twin")
    text = " ".join(part["text"] for m in first["messages"] for part in (
        m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}])
        if part["type"] == "text")
    assert "black_bowl_1, black_bowl_2, red_drawer, black_stove, cookie, white_plate" in text and "akita" not in text
    (url,) = [part["image_url"]["url"] for m in first["messages"] if isinstance(m["content"], list)
              for part in m["content"] if part["type"] == "image_url"]
    seen = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"))
    backend = TwinBackend(0, image_size=64)
    try:
        rendered = backend.reset(0).images["agentview"]  # the episode's first frame (seed 0), as the twin renders it
    finally:
        backend.close()
    np.testing.assert_array_equal(seen, rendered)  # upright: not turned by 180 degrees as LIBERO's are


def test_a_tiny_local_vlm_gives_the_twin_episode_its_graph(tmp_path, tiny_model_dir):
    client = tmp_path / "tiny.yaml"
    client.write_text(f"type: transformers\nname: tiny\nmodel: {tiny_model_dir}\ndevice: cpu\nconstraint: grammar\n"
                      "max_new_tokens: 24\nbatch_size: 1\n")
    out = tmp_path / "run"
    code = main(twin_args(out, client))
    results, infra = lines(out / "episodes.jsonl"), lines(out / "infra_failures.jsonl")
    # A random model under the grammar answers triplet lines over the vocabulary; a cut answer keeps what is whole.
    assert code == 0 and not infra, infra
    (record,) = results
    assert record["vlm_queries"] >= 1 and record["vlm_failed_queries"] == 0 and record["vlm_view"] == "agentview"
    assert "Scene graph:\nView: agentview\n" in record["prompt"]  # the random graph's triplets the prompt keeps


def test_each_suite_turns_its_stored_images_upright():
    from sgvla.libero.suite import LiberoSpatialSuite
    from sgvla.so101.twin.suite import So101TwinSuite

    image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    np.testing.assert_array_equal(LiberoSpatialSuite().upright(image), image[::-1, ::-1])  # rows bottom-up
    assert So101TwinSuite().upright(image) is image


@pytest.fixture(scope="module")
def twin_demos(tmp_path_factory):
    """One scripted twin demo (task 0) at 32x24 pixels: a LeRobot dataset with its ground-truth graphs beside it."""
    from sgvla.so101.twin.demos import generate

    return generate([0], 1, tmp_path_factory.mktemp("twin") / "demos", image_size=(32, 24))


def test_twin_demos_store_the_ground_truth_of_every_frame_and_camera(twin_demos):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from sgvla.scene_graph import load_ontology
    from sgvla.vlm.resource import find_reference_graphs, read_reference_graphs

    path = find_reference_graphs(twin_demos)
    assert path == twin_demos / "sgvla_scene_graphs" / "ground_truth" / "graphs.jsonl"
    refs = read_reference_graphs(path)
    frames = LeRobotDataset("local/so101_twin_demos", root=twin_demos).meta.total_frames
    assert set(refs) == {(0, f, v) for f in range(frames) for v in ("agentview", "robot0_eye_in_hand")}
    named = {o for g in refs.values() for o in g.objects()}
    assert {"black_bowl_1", "black_bowl_2"} <= named <= set(load_ontology("so101_tabletop").objects)
    assert len(refs[(0, 0, "agentview")]) > 0


def test_vlm_bench_scores_twin_frames_against_their_ground_truth(tmp_path, twin_demos, tiny_model_dir, stub,
                                                                 monkeypatch):
    from sgvla.vlm.resource import find_reference_graphs, read_reference_graphs

    base = ["vlm-bench", str(twin_demos), "--ontology", "so101_tabletop", "--no-progress", "--examples", "0"]
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(f"type: transformers\nname: tiny\nmodel: {tiny_model_dir}\ndevice: cpu\nmax_new_tokens: 8\n")
    assert main([*base, "--out", str(tmp_path / "tiny"), "--client", str(tiny), "--frames-per-episode", "2"]) == 0
    (scores,) = json.loads((tmp_path / "tiny" / "scores.json").read_text())
    assert set(scores["scores"]) == {"agentview", "robot0_eye_in_hand"}  # the twin's wrist camera is the eye in hand
    assert json.loads((tmp_path / "tiny" / "timing.json").read_text())["queried"] == 2 * 2

    # The ground truth of the first frame with the bowls' names swapped scores 1: the bowls are interchangeable.
    truth = read_reference_graphs(find_reference_graphs(twin_demos))[(0, 0, "agentview")]
    swap = {"black_bowl_1": "black_bowl_2", "black_bowl_2": "black_bowl_1"}
    monkeypatch.setattr(stub, "answer", "\n".join(f"({swap.get(s, s)}, {r}, {swap.get(o, o)})" for s, r, o in truth))
    exact = tmp_path / "stub.yaml"
    exact.write_text(f"type: openai\nname: stub\nmodel: m\nbase_url: {stub.url('ok')}\n")
    assert main([*base, "--out", str(tmp_path / "stub"), "--client", str(exact), "--frames-per-episode", "1",
                 "--cameras", "agentview"]) == 0
    s = json.loads((tmp_path / "stub" / "scores.json").read_text())[0]["scores"]["agentview"]
    assert s["mean_task_f1"] == 1.0 and s["swapped_frames"] == 1


def test_vlm_bench_refuses_twin_frames_under_another_ontology(twin_demos, tmp_path, capsys):
    tiny = tmp_path / "c.yaml"
    tiny.write_text("type: openai\nname: c\nmodel: m\n")
    assert main(["vlm-bench", str(twin_demos), "--client", str(tiny), "--out", str(tmp_path / "o")]) == 2
    assert "which are not in ontology 'libero_spatial'; pass the dataset's --ontology" in capsys.readouterr().err


def test_fiducial_graphs_of_recorded_frames_are_the_reference_of_vlm_bench(tmp_path, stub, monkeypatch, capsys):
    """A dataset as `sgvla record` writes it (here from the twin at rest, 320x240): fiducial graphs that `sgvla
    annotate` computes from its images and joint states agree with the twin's ground truth, and vlm-bench scores
    against them."""
    from sgvla.scene_graph import load_ontology
    from sgvla.scene_graph.metrics import score_frame
    from sgvla.so101.hardware.joints import JOINTS, from_radians
    from sgvla.so101.hardware.recording import EpisodeStore, dataset_features
    from sgvla.so101.perception.annotations import annotate_dataset
    from sgvla.so101.perception.fiducials import load_marker_config
    from sgvla.so101.twin.config import load_twin_config
    from sgvla.so101.twin.fiducial_check import twin_cameras
    from sgvla.so101.twin.twin import So101Twin
    from sgvla.vlm.resource import find_reference_graphs, read_reference_graphs

    width, height, root = 320, 240, tmp_path / "recorded"
    twin = So101Twin(load_twin_config(), 0)
    try:
        twin.reset(0)
        store = EpisodeStore(root, "local/recorded", 30, dataset_features({c: (height, width, False)
                                                                           for c in ("agentview", "wrist")}))
        joints = twin.joint_positions()
        state = np.array(list(from_radians(JOINTS, [joints[j] for j in JOINTS]).values()), np.float32)
        images = {c: twin.render(c, width, height) for c in ("agentview", "wrist")}
        for _ in range(3):
            store.add({"observation.state": state, "action": state, "task": twin.task,
                       **{f"observation.images.{c}": image for c, image in images.items()}})
        store.commit()
        store.close()
        truth = twin.ground_truth(["agentview"])["agentview"].graph
        cameras = twin_cameras(twin, width, height)
    finally:
        twin.close()

    # From the command line, each camera with the calibration file of its name (the twin's cameras are made from
    # those files) ...
    assert main(["annotate", str(root), "--camera", "wrist=nope"]) == 2
    assert main(["annotate", str(root), "--camera", "top=agentview"]) == 2
    said = capsys.readouterr()
    assert "camera calibration file not found" in said.err and "with NAME one of the dataset's cameras ['agentview', " \
        "'wrist']" in said.err
    assert main(["annotate", str(root)]) == 0
    assert capsys.readouterr().out.strip().endswith("poses and graphs in " + str(root / "sgvla_scene_graphs/fiducial"))
    # ... and in process with the renderer's own pinhole intrinsics: other settings, written anew only when asked.
    with pytest.raises(ValueError, match="camera 'agentview'.s model .* redo them all"):
        annotate_dataset(root, cameras, load_marker_config())
    done = annotate_dataset(root, cameras, load_marker_config(), redo=True)
    path = find_reference_graphs(root)
    assert done.annotated == [0] and path == done.folder / "graphs.jsonl" == root / "sgvla_scene_graphs" / "fiducial" \
        / "graphs.jsonl"
    refs = read_reference_graphs(path)
    assert set(refs) == {(0, f, v) for f in range(3) for v in ("agentview", "robot0_eye_in_hand")}
    ontology = load_ontology("so101_tabletop")
    assert score_frame(refs[(0, 2, "agentview")], truth, ontology).f1 > 0.5

    monkeypatch.setattr(stub, "answer", "\n".join(f"({s}, {r}, {o})" for s, r, o in refs[(0, 0, "agentview")]))
    client = tmp_path / "stub.yaml"
    client.write_text(f"type: openai\nname: stub\nmodel: m\nbase_url: {stub.url('ok')}\n")
    assert main(["vlm-bench", str(root), "--ontology", "so101_tabletop", "--client", str(client), "--out",
                 str(tmp_path / "bench"), "--frames-per-episode", "1", "--cameras", "agentview", "--no-progress",
                 "--examples", "0"]) == 0
    s = json.loads((tmp_path / "bench" / "scores.json").read_text())[0]["scores"]["agentview"]
    assert s["mean_task_f1"] == 1.0
