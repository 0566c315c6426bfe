"""lerobot_policy_sgvla: sgvla's scripted policies as LeRobot policy types, found by LeRobot's plugin discovery.

In process: the types register, build without a checkpoint, and refuse a batch without the env's privileged state
with one line saying what to run. Then, through the real ``lerobot-eval`` (its console script, a subprocess) on
LIBERO-Spatial with the ambiguous prompt, a policy whose success depends on the prompt (prompt_grounded: chance
without a graph, every episode with one): each episode has the success, steps and action digest it has in
``sgvla eval``; and a chunking one (each decision held 2 steps) run as a batch of 2 sub-envs acts in each episode
exactly as run alone (no episode acts on another's queue: LeRobot issue 4327)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lerobot.configs.policies import PreTrainedConfig
from lerobot.envs.factory import make_env_config
from lerobot.policies.factory import get_policy_class, make_policy, make_policy_config, make_pre_post_processors
from lerobot.utils.import_utils import register_third_party_plugins

register_third_party_plugins()  # what lerobot-eval does first: imports lerobot_policy_sgvla by its distribution name

from sgvla.cli import main  # noqa: E402
from sgvla.core.episode import EpisodeKey  # noqa: E402
from sgvla.eval.compare import compare_runs, load_run  # noqa: E402
from sgvla.eval.config import EvalConfig  # noqa: E402
from sgvla.eval.runner import run_plan  # noqa: E402
from sgvla.eval.suite import SuiteConfig  # noqa: E402
from sgvla.policies.registry import PolicyConfig  # noqa: E402

PERTURBATION = "ambiguous_prompt"  # "the black bowl": which of the two, only a scene graph says
TASKS = [1, 6]  # without a graph, prompt_grounded's coin picks the wrong bowl in at least one of them at seed 0


def test_plugin_discovery_registers_the_policy_types():
    assert {"sgvla_expert", "sgvla_prompt_grounded"} <= set(PreTrainedConfig.get_known_choices())
    config = make_policy_config("sgvla_prompt_grounded", tie_break="first", n_action_steps=3)
    assert get_policy_class(config.type).__name__ == "SgvlaPromptGroundedPolicy"
    assert config.sgvla_policy().tie_break == "first" and config.action_delta_indices == [0, 1, 2]
    env = make_env_config("sgvla_libero", privileged=True, task_ids=[0], image_size=64)
    policy = make_policy(config, env_cfg=env)  # no checkpoint: nothing to load
    assert not list(policy.parameters())
    preprocessor, postprocessor = make_pre_post_processors(config)
    assert preprocessor.steps == [] and postprocessor.steps == []
    expert = make_policy(make_policy_config("sgvla_expert"), env_cfg=env)
    assert type(expert).__name__ == "SgvlaExpertPolicy" and expert.sgvla_config.type == "expert"


def test_bad_options_fail_when_built():
    with pytest.raises(ValueError, match="tie_break must be one of"):
        make_policy_config("sgvla_prompt_grounded", tie_break="nearest")
    with pytest.raises(ValueError, match="n_action_steps must be >= 1"):
        make_policy_config("sgvla_expert", n_action_steps=0)


def test_without_the_privileged_state_the_policy_says_what_to_run():
    policy = make_policy(make_policy_config("sgvla_expert"),
                         env_cfg=make_env_config("sgvla_libero", task_ids=[0], image_size=64))
    batch = {"observation.state": torch.zeros(1, 8), "task": ["pick up the black bowl"]}
    with pytest.raises(ValueError, match=r"reads the scene from observation.sgvla_privileged.*--env.privileged=true"):
        policy.select_action(batch)


def _lerobot_eval(out: Path, mode: str, tasks: list[int], episodes: int, batch: int, *policy: str) -> list[bool]:
    """One `lerobot-eval` run; the successes of its eval_info.json in task order, each task's episodes by seed."""
    command = [str(Path(sys.executable).parent / "lerobot-eval"), "--env.type=sgvla_libero", "--env.privileged=true",
               f"--env.context_mode={mode}", f"--env.perturbation={PERTURBATION}",
               f"--env.task_ids=[{','.join(map(str, tasks))}]", "--env.image_size=64", "--env.render_profile=fast",
               f"--env.records={out.parent / 'records.jsonl'}", "--policy.type=sgvla_prompt_grounded", *policy,
               f"--eval.n_episodes={episodes}", f"--eval.batch_size={batch}", "--seed=0", f"--output_dir={out}"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=900, env={**os.environ, "MUJOCO_GL": "egl"})
    assert run.returncode == 0, run.stderr[-3000:]
    info = json.loads((out / "eval_info.json").read_text())
    return [s for task in sorted(info["per_task"], key=lambda t: t["task_id"]) for s in task["metrics"]["successes"]]


@pytest.mark.integration
@pytest.mark.slow
def test_lerobot_eval_scores_each_episode_as_sgvla_eval(tmp_path):
    """Standard and scene_graph, both loops, seed 0: the same success, steps and action digest per episode (and the
    prompt matters: scene_graph succeeds everywhere, standard not)."""
    cfg = EvalConfig(suite=SuiteConfig.choice("libero_spatial")(render_profile="fast", image_size=64),
                     policies=[PolicyConfig.choice("prompt_grounded")()], tasks=TASKS, perturbations=PERTURBATION,
                     modes=["standard", "scene_graph"], episodes=1, output_dir=str(tmp_path / "sgvla"))
    assert run_plan(cfg, progress=False).complete
    successes = {mode: _lerobot_eval(tmp_path / "lerobot" / mode, mode, TASKS, 1, 1)
                 for mode in ("standard", "scene_graph")}

    ours, theirs = load_run(tmp_path / "sgvla"), load_run(tmp_path / "lerobot" / "records.jsonl")
    assert len(ours.records) == len(theirs.records) == 2 * len(TASKS)
    comparison = compare_runs(ours, theirs)
    assert comparison.matched == 4 and not comparison.differing and not comparison.actions_unchecked
    assert comparison.plan_differences == []  # the records' settings: step limit, view, render profile, ...
    for mode, per_task in successes.items():  # LeRobot's own metrics say what the records say
        assert per_task == [theirs.records[EpisodeKey("lerobot", t, PERTURBATION, mode, 0)]["success"] for t in TASKS]
    assert successes["scene_graph"] == [True, True] and False in successes["standard"]
    assert main(["compare", str(tmp_path / "sgvla"), str(tmp_path / "lerobot" / "records.jsonl")]) == 0


@pytest.mark.integration
@pytest.mark.slow
def test_a_chunking_policy_in_a_batch_of_two_acts_as_alone(tmp_path):
    """Each decision held 2 steps (a queue per episode), sub-envs of one vector env (seeds 0 and 1): every episode
    succeeds and has the steps and actions it has when run alone."""
    chunked = "--policy.n_action_steps=2"
    alone = _lerobot_eval(tmp_path / "alone" / "run", "scene_graph", [6], 2, 1, chunked)
    batched = _lerobot_eval(tmp_path / "batched" / "run", "scene_graph", [6], 2, 2, chunked)
    assert alone == batched == [True, True]
    comparison = compare_runs(load_run(tmp_path / "alone" / "records.jsonl"),
                              load_run(tmp_path / "batched" / "records.jsonl"))
    assert comparison.matched == 2 and not comparison.differing and not comparison.actions_unchecked
