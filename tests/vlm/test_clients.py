"""Both clients on the tiny model (local and over HTTP), and every HTTP error path."""

import re

import numpy as np
import pytest

from sgvla.core.config import ConfigError
from sgvla.scene_graph import RELATIONS, load_ontology, parse_triplets
from sgvla.vlm.client import GraphQuery, SceneGraphVLM
from sgvla.vlm.config import OpenAIConfig, TransformersConfig
from sgvla.vlm.prompts import load_prompt

ONTOLOGY = load_ontology("libero_spatial")
LINE = re.compile(r"^\((\w+), (\w+), (\w+)\)$")


def queries(n=2, size=64):
    rng = np.random.default_rng(0)
    return [GraphQuery((rng.integers(0, 256, (size, size, 3), dtype=np.uint8),), "pick up the black bowl",
                       ("agentview", "wrist")[i % 2]) for i in range(n)]


def vlm(backend, constraint="none"):
    return SceneGraphVLM(backend, load_prompt(), ONTOLOGY, constraint=constraint)


def assert_valid_lines(answer):
    """Every finished line is a valid triplet; only a line cut by the token limit may be partial."""
    text = answer.completion.text
    lines = text.split("\n")
    finished, tail = lines[:-1], lines[-1]
    assert finished, text
    for line in finished:
        s, r, o = LINE.match(line).groups()
        assert s in ONTOLOGY.objects and o in ONTOLOGY.objects and r in RELATIONS
    if answer.completion.finish_reason == "length":
        assert sum(answer.parsed.reason_counts().values()) <= 1
    else:
        assert tail == "" and not answer.parsed.rejected


def test_local_model_loads_through_from_pretrained_and_answers(tiny_backend, tiny_model_dir):
    assert (tiny_model_dir / "config.json").is_file() and (tiny_model_dir / "chat_template.jinja").is_file()
    answers = vlm(tiny_backend).query(queries(3))
    assert len(answers) == 3
    for a in answers:
        c = a.completion
        assert c.error is None and isinstance(c.text, str)
        assert c.prompt_tokens > 100 and 1 <= c.completion_tokens <= 32 and c.latency_s > 0
        assert a.parsed == parse_triplets(c.text, ONTOLOGY)  # gibberish parses to empty or valid triplets
        record = a.record()
        assert record["prompt"]["version"] == "1" and record["raw"] == c.text and record["model"] == "tiny-qwen"


def test_local_grammar_constraint_gives_only_valid_triplet_lines(tiny_model_dir):
    backend = TransformersConfig(model=str(tiny_model_dir), max_new_tokens=72, batch_size=2).build()
    for answer in vlm(backend, "grammar").query(queries(2)):
        assert_valid_lines(answer)
        assert len(answer.graph) >= 1


def test_an_answer_cut_at_the_token_limit_is_flagged(tiny_model_dir):
    # The tiny model's constrained JSON needs about 50 tokens per triplet.
    cut = TransformersConfig(model=str(tiny_model_dir), max_new_tokens=24, batch_size=1).build()
    (answer,) = vlm(cut, "json_schema").query(queries(1))
    assert answer.completion.finish_reason == "length" and answer.truncated and answer.record()["truncated"]
    assert not answer.graph and answer.failure == "no valid triplet in the answer (1 not a triplet) (cut at the " \
        f"token limit): {answer.completion.text[:120]!r}"
    whole = TransformersConfig(model=str(tiny_model_dir), max_new_tokens=96, batch_size=1).build()
    (answer,) = vlm(whole, "json_schema").query(queries(1))
    assert answer.completion.finish_reason == "stop" and not answer.truncated and len(answer.graph) >= 1
    assert answer.failure == "" and answer.record()["truncated"] is False


def test_local_json_schema_constraint(tiny_backend, model_server):
    # A server request's token limit must not leak into the shared model's later answers.
    short = OpenAIConfig(model="tiny-qwen", base_url=model_server, max_new_tokens=2).build()
    assert vlm(short).query(queries(1))[0].completion.completion_tokens <= 2
    answer = vlm(tiny_backend, "json_schema").query(queries(1))[0]
    assert answer.completion.text.startswith('{"triplets": [{"subject": "')


def test_http_client_against_vlm_serve(model_server):
    http = OpenAIConfig(model="tiny-qwen", name="tiny-qwen-http", base_url=model_server, max_new_tokens=16).build()
    answers = vlm(http).query(queries(2))
    for a in answers:
        assert a.completion.error is None, a.completion.error
        assert a.completion.prompt_tokens > 100 and a.completion.completion_tokens <= 16
        assert a.completion.finish_reason in ("stop", "length")


def test_http_json_schema_reaches_the_model(model_server):
    http = OpenAIConfig(model="tiny-qwen", base_url=model_server, max_new_tokens=24, constraint="json_schema").build()
    answer = vlm(http, "json_schema").query(queries(1))[0]
    assert answer.completion.error is None, answer.completion.error
    assert answer.completion.text.startswith('{"triplets": [')


def stub_vlm(stub, mode, **kwargs):
    config = dict(model="stub", base_url=stub.url(mode), timeout_s=0.5, max_retries=1, backoff_s=0.01) | kwargs
    return vlm(OpenAIConfig(**config).build())


def test_http_answer_is_parsed(stub):
    answer = stub_vlm(stub, "ok").query(queries(1))[0]
    assert answer.completion.error is None and len(answer.graph) == 4
    body = stub.calls[-1][1]
    assert body["temperature"] == 0.0 and body["messages"][0]["role"] == "system"
    assert body["messages"][1]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")


@pytest.mark.parametrize("mode, error", [
    ("slow", r"timed out after 0.5 s .*gave up after 2 tries"),
    ("malformed", r"malformed response"),
    ("nochoices", r"malformed response \(KeyError"),
    ("big", r"HTTP 413"),
])
def test_http_failures_become_errors_not_exceptions(stub, mode, error):
    answers = stub_vlm(stub, mode).query(queries(2))
    for a in answers:
        assert re.search(error, a.completion.error), a.completion.error
        assert len(a.graph) == 0 and a.completion.text == ""


def test_server_down(closed_port):
    answer = vlm(OpenAIConfig(model="m", base_url=f"http://127.0.0.1:{closed_port}/v1", max_retries=2,
                              backoff_s=0.01).build()).query(queries(1))[0]
    assert "cannot reach" in answer.completion.error and answer.completion.attempts == 3


def test_empty_answer_is_an_empty_graph_not_an_error(stub):
    answer = stub_vlm(stub, "empty").query(queries(1))[0]
    assert answer.completion.error is None and answer.completion.text == "" and len(answer.graph) == 0


def test_overload_is_retried(stub):
    answer = stub_vlm(stub, "flaky").query(queries(1))[0]
    assert answer.completion.error is None and answer.completion.attempts == 2


def test_image_too_large_is_refused_before_sending(stub):
    before = len(stub.calls)
    answer = stub_vlm(stub, "ok", max_image_bytes=1000).query(queries(1, size=128))[0]
    assert answer.completion.error.startswith("image too large") and len(stub.calls) == before


def test_concurrency_limit(stub):
    import time

    start = time.perf_counter()
    answers = stub_vlm(stub, "slow", timeout_s=5.0, concurrency=4).query(queries(4))
    assert all(a.completion.error is None for a in answers)
    assert time.perf_counter() - start < 3.0  # four 1 s requests side by side


def test_api_key_comes_from_the_environment(monkeypatch, stub):
    monkeypatch.delenv("SGVLA_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="environment variable SGVLA_TEST_KEY"):
        OpenAIConfig(model="m", base_url=stub.url("ok"), api_key_env="SGVLA_TEST_KEY").build()
    monkeypatch.setenv("SGVLA_TEST_KEY", "k")
    assert OpenAIConfig(model="m", base_url=stub.url("ok"), api_key_env="SGVLA_TEST_KEY").build().client.headers[
        "authorization"] == "Bearer k"


def test_server_rejects_what_it_cannot_serve(model_server):
    import httpx

    bad = [{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}},
                                                      {"type": "text", "text": "hi"}]}]},
           {"messages": [{"role": "user", "content": "hi"}], "stream": True},
           {"messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"},
           {"messages": []}]
    for body in bad:
        r = httpx.post(f"{model_server}/chat/completions", json=body, timeout=10)
        assert r.status_code == 400 and r.json()["error"]["message"]
    r = httpx.post(f"{model_server}/chat/completions", content=b"{not json", timeout=10)
    assert r.status_code == 400
    assert httpx.get(model_server.removesuffix("/v1") + "/health", timeout=10).json()["status"] == "ok"


def test_vlm_serve_binds_loopback_only():
    from sgvla.vlm.server import check_loopback

    for host in ("127.0.0.1", "::1", "localhost"):
        check_loopback(host)
    for host in ("0.0.0.0", "192.168.1.2", "example.org"):
        with pytest.raises(ValueError, match="loopback"):
            check_loopback(host)
