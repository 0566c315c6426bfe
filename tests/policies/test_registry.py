"""The policy registry, its errors, the tiny-policy command, and the LIBERO observation layout."""

import numpy as np
import pytest

from sgvla.cli import main
from sgvla.core.protocols import StepInput
from dataclasses import dataclass

import sgvla.plugins  # noqa: F401
from sgvla.policies.registry import PolicyConfig, make_policy
from sgvla.policies.scripted import ExpertPolicy


def test_unknown_type_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown policy 'pi7'; choose from ") as error:
        make_policy("pi7")
    assert {"act", "smolvla", "pi0", "pi05", "lerobot", "expert", "prompt_grounded"} <= set(eval(
        str(error.value).split("choose from ")[1]))


def test_learned_policies_need_a_path():
    with pytest.raises(ValueError, match="'pi05' needs a path"):
        make_policy("pi05")


def test_missing_directory_is_named(tmp_path):
    missing = tmp_path / "no_such_policy"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        make_policy("act", path=str(missing))


def test_type_must_match_the_checkpoint(tiny_act_dir):
    with pytest.raises(ValueError, match="'pi05' given, but .* holds a 'act' policy"):
        make_policy("pi05", path=str(tiny_act_dir))
    assert make_policy("lerobot", path=str(tiny_act_dir)).cfg.type == "act"


def test_act_has_no_prompt_budget_to_override(tiny_act_dir):
    with pytest.raises(ValueError, match="no tokenizer step"):
        make_policy("act", path=str(tiny_act_dir), max_prompt_tokens=100)


def test_registry_is_extensible():
    @PolicyConfig.register("constant-test")
    @dataclass
    class ConstantConfig(PolicyConfig):
        speed: float = 1.0

        def make(self, *, ontology, env_config=None):
            return ExpertPolicy(f"{self.display_name} at {self.speed}")

    try:
        assert make_policy("constant-test", speed=2.0).name == "constant-test at 2.0"
        with pytest.raises(ValueError, match="already registered"):
            PolicyConfig.register("act")(ConstantConfig)
    finally:
        PolicyConfig.unregister("constant-test")


def test_make_tiny_policy_command(tmp_path, libero_observations, capsys):
    assert main(["make-tiny-policy", "act", str(tmp_path / "act")]) == 0
    out = capsys.readouterr().out  # the hint is sgvla's own syntax, with the folder made
    assert f"'policies=[{{type: act, path: {tmp_path / 'act'}, device: cpu}}]'" in out and "policy.path=" not in out
    policy = make_policy("act", path=str(tmp_path / "act"))
    policy.reset("task")
    assert policy.act(StepInput(observation=libero_observations(1)[0], prompt="task")).shape == (7,)


def test_observations_are_shaped_like_lerobots_libero_env(libero_space):
    """The test observations follow LeRobot's LIBERO env; checked against the real env where LIBERO loads."""
    setup = pytest.importorskip("sgvla.libero.setup", reason="LIBERO's offline setup is not available")
    setup.prepare_libero()
    from lerobot.envs.libero import LiberoEnv
    from libero.libero import benchmark

    size = libero_space["pixels"]["image"].shape[0]
    env = LiberoEnv(task_suite=benchmark.get_benchmark_dict()["libero_spatial"](), task_id=0,
                    task_suite_name="libero_spatial", obs_type="pixels_agent_pos",
                    observation_height=size, observation_width=size)
    assert env.observation_space == libero_space
    assert env.action_space.shape == (7,) and np.all(env.action_space.low == -1) and np.all(env.action_space.high == 1)
