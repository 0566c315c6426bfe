"""Prompt templates and client configs: rendering, identity, and errors that name file and key."""

import dataclasses

import pytest

from sgvla.core.config import ConfigError
from sgvla.scene_graph import RELATIONS, load_ontology
from sgvla.vlm.config import CLIENTS_DIR, OpenAIConfig, TransformersConfig, load_client_config
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


def test_shipped_client_configs_load():
    configs = {p.stem: load_client_config(p) for p in CLIENTS_DIR.glob("*.yaml")}
    assert isinstance(configs["qwen2_5_vl_7b"], TransformersConfig)
    assert isinstance(configs["gemini"], OpenAIConfig) and configs["gemini"].constraint == "json_schema"
    assert load_client_config("vllm_local", {"model": "x"}).model == "x"


@pytest.mark.parametrize("text, match", [
    ("type: transformers\nmodel: m\nbatch_sise: 2\n", r"c\.yaml: unknown key\(s\) batch_sise"),
    ("type: transformers\nmodel: m\nbatch_size: two\n", r"c\.yaml\.batch_size: expected int"),
    ("type: grpc\nmodel: m\n", r"c\.yaml\.type: expected one of"),
    ("type: openai\nbase_url: http://127.0.0.1:1/v1\n", r"c\.yaml\.model: missing"),
    ("type: openai\nmodel: m\nconstraint: grammar\n", r"c\.yaml: constraint 'grammar' is for local models"),
    ("type: transformers\nmodel: m\nconstraint: regex\n", r"c\.yaml: constraint 'regex' unknown"),
])
def test_client_config_errors_name_file_and_key(tmp_path, text, match):
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_client_config(tmp_path / "c.yaml")
