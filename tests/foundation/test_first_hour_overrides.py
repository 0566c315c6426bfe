"""A bad `key=value` override is blamed on the override, not on the plan file it was laid over: the shipped
`config/eval/default.yaml` is fine, and an error naming it sends a new user to the wrong place. A plan file that is
itself wrong is still blamed on the file."""

import pytest

import sgvla.plugins  # noqa: F401  (the plan names registered suites, policies, graph sources)
from sgvla.cli import main
from sgvla.core.config import ConfigError, load_config
from sgvla.eval.config import EvalConfig

PLAN = "config/eval/default.yaml"


@pytest.mark.parametrize("items, message", [
    ({"episodes": "x"}, "command line: episodes=x: episodes: expected int, got 'x'"),
    ({"bogus": 1}, "command line: bogus=1: unknown key(s) bogus; valid keys: alpha,"),
    ({"suite.image_size": -3}, "command line: suite.image_size=-3: suite(libero_spatial): image_size must be within"),
    ({"episodes": 0}, "command line: episodes=0: episodes must be >= 1, got 0"),
    ({"policies": [{"type": "nope"}]}, "command line: policies=[{type: nope}]: policies[0]: unknown policy 'nope'"),
    # the first override at fault is named, not one that is fine
    ({"workers": 1, "graph_source.x": 1}, "command line: graph_source.x=1: graph_source(ground_truth): unknown key(s) x"),
])
def test_an_override_error_names_the_override_not_the_file(items, message):
    with pytest.raises(ConfigError) as error:
        load_config(EvalConfig, PLAN, items)
    assert str(error.value).startswith(message), str(error.value)
    assert PLAN not in str(error.value)


def test_a_bad_file_is_still_the_files_error(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("episodes: many\ntasks: [0]\n")
    with pytest.raises(ConfigError, match=rf"^{plan}\.episodes: expected int, got 'many'"):
        load_config(EvalConfig, plan, {"workers": 1})
    # an override that repairs the file's mistake is no error at all
    assert load_config(EvalConfig, plan, {"episodes": 2}).episodes == 2


def test_sgvla_eval_says_command_line(capsys):
    assert main(["eval", "--config", PLAN, "episodes=x"]) == 2
    out = capsys.readouterr().out.replace("\n", "")
    assert "sgvla eval: command line: episodes=x: episodes: expected int, got 'x'" in out, out
    assert main(["eval", "--config", PLAN, "--workers", "0"]) == 2
    assert "command line: workers=0: workers must be" in capsys.readouterr().out.replace("\n", "")


def test_sgvla_eval_finds_the_shipped_plans_from_any_folder(tmp_path, monkeypatch, capsys):
    """`--config config/eval/...` (and the default plan) name the shipped plans from outside the checkout too, as the
    launches' plan arguments do: the error is the override's, not "config file not found"."""
    monkeypatch.chdir(tmp_path)
    for args in (["--config", PLAN], []):
        assert main(["eval", *args, "episodes=x"]) == 2
        out = capsys.readouterr().out.replace("\n", "")
        assert "command line: episodes=x" in out and "not found" not in out, out
    assert main(["eval", "--config", "config/eval/nope.yaml"]) == 2
    assert "config file not found" in capsys.readouterr().out
