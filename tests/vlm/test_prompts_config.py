"""Prompt templates and client configs: rendering, identity, and errors that name file and key."""

import dataclasses
import logging

import pytest

from sgvla.core.config import ConfigError, parse_line
from sgvla.scene_graph import RELATIONS, load_ontology
from sgvla.vlm.config import (CLIENTS_DIR, ClientConfig, OpenAIConfig, TransformersConfig, client_config_from_mapping,
                              load_client_config)
from sgvla.vlm.constraints import full_graph_tokens
from sgvla.vlm.prompts import PromptTemplate, load_prompt


def test_default_prompt_renders_protocol_fields_per_camera():
    prompt = load_prompt()
    objects = load_ontology("libero_spatial").objects
    agent = prompt.render("pick up the bowl", "agentview", objects)
    wrist = prompt.render("pick up the bowl", "wrist", objects)
    for p in (agent, wrist):
        assert "Task: pick up the bowl" in p.user
        assert ", ".join(objects) in p.user and ", ".join(RELATIONS) in p.user
        assert "one triplet per line" in p.user and p.system
    assert "third-person" in agent.user and "wrist" in wrist.user
    assert prompt.identity == {"name": "scene_graph", "version": "1", "sha": prompt.sha}


def test_editing_a_template_changes_its_identity():
    prompt = load_prompt()
    edited = dataclasses.replace(prompt, user=prompt.user + "\nBe brief.")
    assert edited.sha != prompt.sha and edited.label != prompt.label


def test_prompt_errors(tmp_path):
    with pytest.raises(ValueError, match="no description for camera"):
        load_prompt().render("t", "frontview", ("a", "b"))
    with pytest.raises(ValueError, match="bad placeholder"):
        PromptTemplate("p", "1", "", "{colour}", {"agentview": "x"})
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nversion: 2\nsystem: s\nuser: '{task}'\ncameras: {agentview: x}\n")
    with pytest.raises(ConfigError, match=r"p\.yaml.*version"):
        load_prompt(path)


def test_shipped_client_configs_load_and_hold_a_full_graph(caplog):
    ontologies = [load_ontology(name) for name in ("libero_spatial", "so101_tabletop")]
    with caplog.at_level(logging.WARNING, logger="sgvla.vlm.config"):
        configs = {p.stem: load_client_config(p, ontology=o) for p in CLIENTS_DIR.glob("*.yaml") for o in ontologies}
    assert not caplog.records  # every shipped budget holds a full graph of every shipped ontology
    assert all(c.max_new_tokens >= full_graph_tokens(ontologies[0].objects) for c in configs.values())
    assert isinstance(configs["qwen2_5_vl_7b"], TransformersConfig)
    assert isinstance(configs["gemini"], OpenAIConfig) and configs["gemini"].constraint == "json_schema"
    assert load_client_config("vllm_local", {"model": "x"}).model == "x"
    assert OpenAIConfig(model="m").max_new_tokens == TransformersConfig(model="m").max_new_tokens == 4096


def test_a_budget_too_small_for_a_full_graph_is_warned_with_the_number_needed(caplog):
    with caplog.at_level(logging.WARNING, logger="sgvla.vlm.config"):
        config = load_client_config("vllm_local", {"max_new_tokens": 512}, load_ontology("libero_spatial"))
    assert config.max_new_tokens == 512  # warned, not refused: the number is an upper bound (see sgvla.vlm.config)
    (record,) = caplog.records
    assert "vllm_local.yaml: max_new_tokens 512 may not hold a full graph of libero_spatial (7 objects): that " \
           "takes up to 3897 tokens" in record.getMessage()


@pytest.mark.parametrize("text, match", [
    ("type: transformers\nmodel: m\nbatch_sise: 2\n",
     r"c\.yaml\(transformers\): unknown key\(s\) batch_sise; valid keys: attn_implementation, batch_size"),
    ("type: transformers\nmodel: m\nbatch_size: two\n", r"c\.yaml\(transformers\)\.batch_size: expected int"),
    ("type: grpc\nmodel: m\n", r"c\.yaml: unknown VLM client 'grpc'; choose from \['openai', 'transformers'\]"),
    ("type: openai\nbase_url: http://127.0.0.1:1/v1\n", r"c\.yaml\(openai\): missing key\(s\) model"),
    ("type: openai\nmodel: m\nconstraint: grammar\n", r"c\.yaml\(\w+\): constraint 'grammar' is for local models"),
    ("type: transformers\nmodel: m\nconstraint: regex\n", r"c\.yaml\(\w+\): constraint 'regex' unknown"),
    ("type: transformers\nmodel: m\nmax_new_tokens: 0\n", r"c\.yaml\(\w+\): max_new_tokens must be >= 1, got 0"),
    ("type: transformers\nmodel: m\ndevice: gpu\n", r"c\.yaml\(\w+\): device 'gpu' unknown; choose auto, cpu, mps"),
    ("type: transformers\nmodel: m\ndtype: fp16\n", r"c\.yaml\(\w+\): dtype 'fp16' unknown; choose from \['auto', "),
    ("type: transformers\nmodel: m\nattn_implementation: fast\n", r"attn_implementation 'fast' unknown"),
    ("model: m\n", r"c\.yaml: a VLM client needs a `type`; choose from \['openai', 'transformers'\]"),
    ("type: openai\nmodel: m\nbase_url: 127.0.0.1:8000\n", r"base_url '127.0.0.1:8000' must start with http"),
    ("type: openai\nmodel: m\nbackoff_s: -1\n", r"c\.yaml\(\w+\): backoff_s must be >= 0, got -1"),
    ("type: openai\nmodel: m\ntimeout_s: 0\n", r"c\.yaml\(\w+\): timeout_s must be > 0, got 0"),
    ("type: openai\nmodel: m\napi_key_env: sk-abc123\n", r"api_key_env 'sk-abc123' is not an environment variable"),
    ("type: openai\nmodel: ''\n", r"c\.yaml\(\w+\): model is empty"),
])
def test_client_config_errors_name_file_and_key(tmp_path, text, match):
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_client_config(tmp_path / "c.yaml")


def test_client_overrides_nest_as_a_plan_s_do(tmp_path):
    """`key.sub=value` reaches a nested option (sgvla.core.config's one override syntax), never a flat key."""
    overrides = parse_line("processor_kwargs.max_pixels=50176 processor_kwargs.min_pixels=3136 batch_size=2")
    config = load_client_config("qwen2_5_vl_7b", overrides)
    assert config.processor_kwargs == {"max_pixels": 50176, "min_pixels": 3136} and config.batch_size == 2
    (tmp_path / "c.yaml").write_text("type: openai\nmodel: m\nextra_body: {top_k: 1}\n")
    config = load_client_config(tmp_path / "c.yaml", parse_line("extra_body.chat_template_kwargs.thinking=false"))
    assert config.extra_body == {"top_k": 1, "chat_template_kwargs": {"thinking": False}}
    with pytest.raises(ConfigError, match=r"unknown key\(s\) batch_sise; valid keys: .*batch_size"):
        load_client_config("qwen2_5_vl_7b", {"batch_sise": 2})
    with pytest.raises(ConfigError, match=r"unknown VLM client 'grpc'; choose from \['openai', 'transformers'\]"):
        load_client_config("qwen2_5_vl_7b", {"type": "grpc"})


def test_clients_are_registered_choices_of_one_kind():
    assert ClientConfig.choices() == {"openai": OpenAIConfig, "transformers": TransformersConfig}
    assert client_config_from_mapping({"type": "openai", "model": "m"}) == OpenAIConfig(model="m")
    with pytest.raises(TypeError, match="kind of VLM client"):
        ClientConfig(model="m")
