"""The VLM graph source of an evaluation against a real HTTP server on 127.0.0.1: every failure of the
VLM (down, HTTP 500, garbage, a stall, a malformed reply) fails the episode as an infrastructure failure
with the reason; it never becomes an (empty) graph. Mid-episode the last valid graph is kept up to its
maximum age; answers cut at the token limit keep their complete triplets and are counted."""

import time

import numpy as np
import pytest

from sgvla.libero.suite import LiberoSpatialSuite
from sgvla.vlm.source import GraphSourceError, VLMSource
from sgvla.scene_graph import load_ontology
from sgvla.core.state import Observation
from sgvla.vlm.client import SceneGraphVLM
from sgvla.vlm.config import OpenAIConfig
from sgvla.vlm.prompts import load_prompt

ONTOLOGY = load_ontology("libero_spatial")
TASK = "pick up the black bowl on the stove and place it on the plate"
FRAME = Observation({}, {"agentview": np.zeros((32, 32, 3), np.uint8)}, {}, TASK)


def source(base_url: str, **kwargs) -> VLMSource:
    client = OpenAIConfig(model="stub", base_url=base_url, timeout_s=0.5, max_retries=0, backoff_s=0.01)
    src = VLMSource(SceneGraphVLM(client.build(), load_prompt(), ONTOLOGY), LiberoSpatialSuite().upright, rate_hz=50.0, **kwargs)
    src.reset()
    return src


@pytest.mark.parametrize("mode, reason", [
    ("error500", r"HTTP 500 from .*internal server error"),
    ("garbage", r"no valid triplet in the answer \(1 not a triplet\): 'I am not sure"),
    ("stall", r"timed out after 0.5 s"),
    ("malformed", r"malformed response"),
    ("empty", r"empty answer"),
])
def test_a_failed_first_query_fails_the_episode_with_the_reason(stub, mode, reason):
    src = source(stub.url(mode))
    try:
        start = time.monotonic()
        with pytest.raises(GraphSourceError, match=f"VLM: the first query of the episode failed: {reason}"):
            src.view_graph("agentview", FRAME, None, TASK)
        assert time.monotonic() - start < 3  # at once, not after the 300 s first-answer limit
        stats = src.stats()
        assert stats["vlm_queries"] == 1 and stats["vlm_failed_queries"] == 1
    finally:
        src.close()


def test_a_vlm_that_is_down_fails_the_episode(closed_port):
    src = source(f"http://127.0.0.1:{closed_port}/v1")
    try:
        with pytest.raises(GraphSourceError, match="first query of the episode failed: cannot reach"):
            src.view_graph("agentview", FRAME, None, TASK)
    finally:
        src.close()


def test_the_live_graph_keeps_the_last_valid_answer_up_to_its_max_age(stub, fixed_graph):
    src = source(stub.url("once-live"), max_age_s=1.0)  # the first answer is valid, every later one HTTP 500
    try:
        first = src.view_graph("agentview", FRAME, None, TASK)
        assert sorted(first.graph) == sorted(fixed_graph)
        deadline = time.monotonic() + 5
        while src.worker.failed < 2:  # the loop goes on; new frames are asked about and fail
            assert time.monotonic() < deadline
            assert src.view_graph("agentview", FRAME, None, TASK).graph == first.graph
            time.sleep(0.02)
        time.sleep(1.0)
        with pytest.raises(GraphSourceError, match=r"newest valid graph is \d+\.\d s old \(graph_source.max_graph_age_s 1\); "
                                                   r"\d+ of \d+ queries failed, last: HTTP 500") as failure:
            src.view_graph("agentview", FRAME, None, TASK)
        assert float(str(failure.value).split(" is ")[1].split(" s ")[0]) >= 1.0
        stats = src.stats()
        assert stats["vlm_failed_queries"] >= 2 and stats["vlm_queries"] == stats["vlm_failed_queries"] + 1
        assert "HTTP 500" in stats["vlm_failure"] and 0 < stats["vlm_graph_age_max_s"] <= 1.0
    finally:
        src.close()


def test_a_cut_answer_keeps_its_complete_triplets_and_is_counted(stub, fixed_graph):
    src = source(stub.url("cut"))  # the 4-triplet JSON answer, 5 characters short, finish_reason "length"
    try:
        graph = src.view_graph("agentview", FRAME, None, TASK).graph
        assert len(graph) == 3 and set(graph) < set(fixed_graph)
        stats = src.stats()
        assert stats["vlm_truncated_answers"] == 1 and stats["vlm_failed_queries"] == 0
        assert stats["vlm_dropped_by_reason"] == {"cut at the token limit": 1} and stats["vlm_triplets_kept"] == 3
    finally:
        src.close()


def test_an_answer_with_some_invalid_entries_keeps_the_valid_ones_and_counts_the_rest(stub, fixed_graph):
    src = source(stub.url("partial"))  # the 4 valid triplets plus an unknown relation and an unknown object
    try:
        graph = src.view_graph("agentview", FRAME, None, TASK).graph
        assert sorted(graph) == sorted(fixed_graph)
        stats = src.stats()
        assert stats["vlm_rejected_entries"] == 2 and stats["vlm_answers_with_rejections"] == 1
        assert stats["vlm_entries"] == 6 and stats["vlm_triplets_kept"] == 4
        assert stats["vlm_dropped_by_reason"] == {"unknown object": 1, "unknown relation": 1}
        assert stats["vlm_failed_queries"] == 0
    finally:
        src.close()


def test_a_view_the_episode_does_not_render_is_an_error_not_a_substitute(stub):
    src = source(stub.url("ok"))
    try:
        with pytest.raises(ValueError, match=r"needs an image of view 'robot0_eye_in_hand'.*\['agentview'\]"):
            src.view_graph("robot0_eye_in_hand", FRAME, None, TASK)
    finally:
        src.close()
