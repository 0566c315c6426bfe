"""The first commands explain themselves: bare `sgvla` says how to start (exit 0), `sgvla --help` is whole
sentences, and `sgvla eval --help` lists every key of a plan with its meaning and default, read from the plan's own
declarations so that the list cannot drift from the code."""

import dataclasses
import re

import sgvla.plugins  # noqa: F401  (the defaults name registered choices)
from sgvla.cli import DESCRIPTION, build_parser, main
from sgvla.core.field_docs import field_docs, first_sentence
from sgvla.eval.config import EvalConfig, PolicyServerConfig, plan_keys
from sgvla.eval.executor import RayExecutor
from sgvla.paths import CONFIG_DIR


def test_bare_sgvla_says_how_to_start_and_exits_0(capsys):
    assert main([]) == 0
    said = capsys.readouterr().out
    assert max(map(len, said.splitlines())) <= 100, said
    assert "sgvla eval " in said and "sgvla doctor" in said and "make eval" in said and "videos/" in said
    for plan in (CONFIG_DIR / "eval").glob("*.yaml"):
        assert f"config/eval/{plan.name}" in said, plan.name


def test_the_overview_is_whole_sentences(capsys):
    assert DESCRIPTION.endswith(".") and "\n" not in DESCRIPTION
    text = " ".join(build_parser().format_help().split())
    assert " ".join(DESCRIPTION.split()) in text and "sgvla COMMAND --help" in text


def test_every_plan_key_says_what_it_is():
    for cls in (EvalConfig, PolicyServerConfig, RayExecutor):
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in field_docs(cls)]
        assert not missing, f"{cls.__name__}: give {missing} a comment where they are declared"


def test_eval_help_lists_every_key_with_its_default():
    text = build_parser("eval")._subparsers._group_actions[0].choices["eval"].format_help()
    keys = {key: default for key, default, _ in plan_keys()}
    assert {f.name for f in dataclasses.fields(EvalConfig)} <= keys.keys()
    assert {"policy_server.max_wait_ms", "executor.address"} <= keys.keys()
    listed = set(re.findall(r"^  ([a-z_.]+) {2,}", text, flags=re.M))
    assert set(keys) <= listed, set(keys) - listed
    assert "Default: 10." in text and "Default: [standard, scene_graph]." in text  # episodes, modes
    assert max(map(len, text.splitlines()[text.splitlines().index(""):])) <= 100


def test_a_first_sentence_is_a_sentence():
    assert first_sentence("seeds seed_offset .. seed_offset + episodes - 1") == \
        "Seeds seed_offset .. seed_offset + episodes - 1."
    assert first_sentence("How long a batch waits. 30 ms: measured") == "How long a batch waits."
    assert first_sentence("word " * 60, limit=20).endswith(" ...")
