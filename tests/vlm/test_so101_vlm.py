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
