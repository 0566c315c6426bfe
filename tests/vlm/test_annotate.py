"""`sgvla vlm-annotate` on a LeRobot dataset: the versioned resource beside it, resumable,
and usable as the reference of `vlm-bench`."""

import json

import numpy as np
import pytest

from sgvla.cli import main
from sgvla.vlm.resource import FORMAT, read_reference_graphs


@pytest.fixture(scope="module")
def lerobot_root(tmp_path_factory):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    root = tmp_path_factory.mktemp("lerobot") / "so101_tiny"
    shape = (48, 64, 3)
    features = {f"observation.images.{k}": {"dtype": "image", "shape": shape, "names": ["height", "width", "channels"]}
                for k in ("front", "wrist")}
    features["action"] = {"dtype": "float32", "shape": (2,), "names": None}
    ds = LeRobotDataset.create("local/so101_tiny", fps=10, features=features, root=root, use_videos=False)
    rng = np.random.default_rng(0)
    for task in ("put the bowl on the stove", "put the bowl on the cookie box"):
        for _ in range(4):
            ds.add_frame({"observation.images.front": rng.integers(0, 256, shape, dtype=np.uint8),
                          "observation.images.wrist": rng.integers(0, 256, shape, dtype=np.uint8),
                          "action": np.zeros(2, np.float32), "task": task})
        ds.save_episode()
    ds.finalize()
    return root


def test_annotate_writes_the_resource_and_resumes(tmp_path, lerobot_root, stub):
    client = tmp_path / "c.yaml"
    client.write_text(f"type: openai\nname: stub-vlm\nmodel: m\nbase_url: {stub.url('ok')}\n")
    args = ["vlm-annotate", str(lerobot_root), "--client", str(client), "--ontology", "libero_spatial",
            "--frames-per-episode", "2", "--no-progress"]
    calls = len(stub.calls)
    assert main(args) == 0
    assert len(stub.calls) - calls == 2 * 2 * 2  # episodes x frames x cameras
    folder = next((lerobot_root / "sgvla_scene_graphs").iterdir())
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["format"] == FORMAT and meta["version"] == "1" and meta["model"] == "stub-vlm"
    assert meta["prompt"]["version"] == "1" and "{task}" in meta["prompt"]["template"]["user"]
    assert meta["cameras"] == {"observation.images.front": "agentview",
                               "observation.images.wrist": "robot0_eye_in_hand"}
    assert "ground truth" in (folder / "README.md").read_text()
    records = [json.loads(line) for line in (folder / "graphs.jsonl").read_text().splitlines()]
    assert {(r["episode"], r["frame"], r["camera"]) for r in records} == {
        (e, f, c) for e in ("0", "1") for f in (0, 3) for c in ("agentview", "robot0_eye_in_hand")}
    r = records[0]
    assert r["source"] == "vlm" and len(r["triplets"]) == 4 and r["raw"] == stub.answer and r["prompt_version"] == "1"

    calls = len(stub.calls)
    assert main(args) == 0 and len(stub.calls) == calls  # resumed: nothing asked again

    graphs = read_reference_graphs(folder)
    assert len(graphs) == 8 and len(graphs[(1, 3, "robot0_eye_in_hand")]) == 4
    out = tmp_path / "bench"
    assert main(["vlm-bench", str(lerobot_root), "--reference", str(folder), "--client", str(client),
                 "--frames-per-episode", "2", "--out", str(out), "--no-progress", "--examples", "1"]) == 0
    scores = json.loads((out / "scores.json").read_text())[0]["scores"]
    assert scores["agentview"]["mean_task_f1"] == 1.0 and set(scores["agentview"]["per_task_f1"]) == {"0", "1"}
