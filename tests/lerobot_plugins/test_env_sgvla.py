"""lerobot_env_sgvla: sgvla's suites as LeRobot env types, their task string the live context of sgvla's engine.

In process: LeRobot's plugin discovery registers the env types; a bad option fails when the config is built, naming
the valid choices; on the SO101 twin (a quick MuJoCo scene) the ``scene_graph`` task string is the graph of the scene
as it is now, rebuilt after the scene changed, and ``standard``'s is the task alone. Then the equivalence: the same
seeds give the same episodes through the real ``lerobot-eval`` (its console script, a subprocess) and through
``sgvla eval``'s runner, for a tiny ACT on LIBERO-Spatial. ACT draws nothing at inference (no VAE sampling, no
noise), so its actions are the same in both loops as they are; a flow-matching policy (SmolVLA) draws its noise from
torch's global generator in LeRobot's loop and needs ``--env.seed_noise=true`` for that (test_env_noise.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import draccus
import mujoco
import numpy as np
import pytest
from lerobot.envs.configs import EnvConfig
from lerobot.envs.factory import make_env_config
from lerobot.utils.import_utils import register_third_party_plugins

register_third_party_plugins()  # what lerobot-eval does first: imports lerobot_env_sgvla by its distribution name

from lerobot_env_sgvla.env import SgvlaEnv  # noqa: E402

from sgvla.core.context import ContextInputs, ContextMode  # noqa: E402
from sgvla.scene_graph.serialize import prompt_name  # noqa: E402
from sgvla.sim.mujoco_state import free_joint  # noqa: E402

CONTROL_MODES = ("standard", "scene_graph", "filler", "wrong_graph", "shuffled_graph")


def test_plugin_discovery_registers_the_env_types():
    choices = EnvConfig.get_known_choices()
    assert {"sgvla_libero", "sgvla_so101_twin"} <= set(choices)
    config = make_env_config("sgvla_libero", context_mode="wrong_graph", task_ids=[3], image_size=64)
    assert config.type == "sgvla_libero" and config.plan().tasks == [3] and config.plan().modes == ["wrong_graph"]
    # LeRobot's libero keys, so LeRobot LIBERO policies fit
    assert config.features_map["pixels/agentview_image"] == "observation.images.image"
    assert config.features["pixels/agentview_image"].shape == (64, 64, 3)


@pytest.mark.parametrize("env_type", ["sgvla_libero", "sgvla_so101_twin"])
def test_bad_options_fail_when_built_naming_the_choices(env_type):
    with pytest.raises(ValueError) as error:
        make_env_config(env_type, context_mode="graph")
    assert "'graph'" in str(error.value)
    for mode in CONTROL_MODES:
        assert mode in str(error.value)
    with pytest.raises(ValueError, match="ground_truth"):
        make_env_config(env_type, graph_source="oracle")
    with pytest.raises(ValueError, match="unknown key.* bogus; valid keys: client"):  # a source's own options
        make_env_config(env_type, graph_source="vlm", graph_source_options="client=qwen2_5_vl_7b bogus=1")
    with pytest.raises(ValueError, match="unknown task id"):
        make_env_config(env_type, task_ids=[42])
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        make_env_config(env_type, episode_length=0)
    with pytest.raises(ValueError, match="image_size"):
        make_env_config(env_type, image_size=8)


@dataclass
class EnvOnly:
    env: EnvConfig


def test_bad_option_on_the_command_line_fails_as_it_is_parsed():
    """lerobot-eval's parser (draccus) builds the config from --env.* options: the sgvla error, with the choices, is
    the cause of its ParsingError (printed in lerobot-eval's traceback) before any env or policy is made."""
    with pytest.raises(draccus.utils.ParsingError) as error:
        draccus.parse(EnvOnly, args=["--env.type=sgvla_libero", "--env.context_mode=graph"])
    assert "unknown context mode 'graph'; choose from" in str(error.value.__cause__)
    parsed = draccus.parse(EnvOnly, args=["--env.type=sgvla_so101_twin", "--env.context_mode=shuffled_graph",
                                          "--env.task_ids=[1,4]", "--env.episode_length=50"])
    assert parsed.env.type == "sgvla_so101_twin" and parsed.env.plan().tasks == [1, 4]
    assert parsed.env.plan().max_steps == 50 and parsed.env.plan().modes == ["shuffled_graph"]


def twin_env(mode: str) -> SgvlaEnv:
    return SgvlaEnv(make_env_config("sgvla_so101_twin", context_mode=mode, task_ids=[0], episode_length=5,
                                    image_size=64), 0)


def live_prompt(env: SgvlaEnv) -> str:
    """What sgvla's scene_graph mode makes of the env's scene now (its own code, not the env's)."""
    view = env.plan.view
    graph = env.backend.ground_truth([view])[view]
    return ContextMode.choice("scene_graph")().context(env.backend.task, graph, view, env.ontology).prompt


def swap_bowls(env: SgvlaEnv) -> None:
    """The target bowl and its look-alike exchange places (the target leaves the drawer it stood on)."""
    twin = env.backend.twin
    model, data = twin.model, twin.data
    a, b = (free_joint(model, twin.index.body_ids[twin.index.column(name)]).qpos
            for name in ("black_bowl_1", "black_bowl_2"))
    data.qpos[a], data.qpos[b] = data.qpos[b].copy(), data.qpos[a].copy()
    mujoco.mj_forward(model, data)


def test_scene_graph_task_is_the_live_graph_and_follows_the_scene():
    env = twin_env("scene_graph")
    try:
        obs, info = env.reset(seed=0)
        assert info == {"is_success": False}
        assert obs["agent_pos"].shape == (6,) and obs["pixels"]["agentview"].shape == (64, 64, 3)
        first = env.task_description
        assert first == live_prompt(env) and first.startswith(env.backend.task + "\n")
        view = env.plan.view
        shown = env.backend.ground_truth([view])[view].graph.filter_subject(env.ontology.manipulated)
        assert len(shown) >= 2
        for s, r, o in shown:  # the graph's triplets, as sgvla's serializer names them
            assert f"({prompt_name(s, env.ontology)}, {r}, {prompt_name(o, env.ontology)})" in first
        assert "is_on_top_of, red_drawer" in first

        swap_bowls(env)
        obs, reward, terminated, truncated, info = env.step(obs["agent_pos"])  # hold the arm where it is
        assert not terminated and not truncated and info["is_success"] is False
        assert env.task_description != first
        assert env.task_description == live_prompt(env)  # rebuilt from this step's scene
        assert "is_on_top_of, red_drawer" not in env.task_description
    finally:
        env.close()


def test_standard_task_is_the_task_alone():
    env = twin_env("standard")
    try:
        obs, _ = env.reset(seed=1)
        task = "pick up the black bowl on top of the drawer and place it on the stove"
        assert env.task_description == env.backend.task == task
        swap_bowls(env)
        env.step(obs["agent_pos"])
        assert env.task_description == env.backend.task
    finally:
        env.close()


def test_the_policys_tokenizer_counts_the_prompt(tmp_path):
    """With tokenizer_from (a checkpoint: here pi0's processors and tokenizer, no weights), the filler matches the
    graph block's length in that tokenizer's tokens and the record holds the prompt's budget, as in `sgvla eval`."""
    from sgvla.policies.lerobot_vla import checkpoint_prompt_meter
    from sgvla.policies.tiny import build_weightless_pi0

    checkpoint = build_weightless_pi0(tmp_path / "pi0")
    meter = checkpoint_prompt_meter(checkpoint)
    env = SgvlaEnv(make_env_config("sgvla_so101_twin", context_mode="filler", task_ids=[2], episode_length=1,
                                   image_size=64, tokenizer_from=str(checkpoint), records=str(tmp_path / "ep.jsonl")),
                   2)
    try:
        obs, _ = env.reset(seed=5)
        view = env.plan.view
        graph = env.backend.ground_truth([view])[view]
        inputs = ContextInputs(seed=5, count_tokens=lambda text: meter.budget(text).tokens)
        assert env.task_description == ContextMode.choice("filler")().context(env.backend.task, graph, view,
                                                                               env.ontology, inputs=inputs).prompt
        env.step(obs["agent_pos"])  # the episode's one step: its record is written
    finally:
        env.close()
    (record,) = map(json.loads, (tmp_path / "ep.jsonl").read_text().splitlines())
    assert record["control_counter"] == "tokenizer" and record["prompt_budget"] == 48  # pi0's
    assert record["prompt_tokens"] == meter.budget(record["prompt"]).tokens
    assert (record["seed"], record["task_id"], record["steps"], record["mode"]) == (5, 2, 1, "filler")


class RecordedPolicy:
    """A policy as the engine sees it, keeping every action it gives (as the backend will step it)."""

    def __init__(self, policy, actions: list):
        self.policy, self.actions, self.name = policy, actions, policy.name

    def act(self, step):
        action = self.policy.act(step)
        self.actions.append(np.asarray(action, dtype=np.float64).reshape(-1).tolist())
        return action

    def __getattr__(self, name):
        return getattr(self.policy, name)


@pytest.mark.parametrize("mode", ["filler", "wrong_graph", "shuffled_graph"])
def test_control_modes_task_is_the_controls_text_of_the_live_scene(mode):
    """The control arms' text, seeded by the episode's seed, from the scene of each step (words counted: the env
    does not know LeRobot's policy's tokenizer)."""
    env = twin_env(mode)
    control = ContextMode.choice(mode)()
    view = env.plan.view

    def expected(seed: int) -> str:
        graph = env.backend.ground_truth([view])[view]
        return control.context(env.backend.task, graph, view, env.ontology, inputs=ContextInputs(seed=seed)).prompt

    try:
        obs, _ = env.reset(seed=4)
        first = env.task_description
        assert first == expected(4) and first != env.backend.task
        swap_bowls(env)
        env.step(obs["agent_pos"])
        assert env.task_description == expected(4)
        if mode != "filler":  # the filler's words depend on the graph's length only
            assert env.task_description != first
    finally:
        env.close()


@pytest.mark.integration
def test_lerobot_eval_and_sgvla_eval_give_the_same_episodes(tmp_path):
    """The same seeds, task, horizon and mode through LeRobot's loop (the env) and sgvla's (the runner's worker, which
    `sgvla eval` runs each episode with): the same action at every step, the same success per episode in
    eval_info.json and in sgvla's records, and the same record otherwise (first prompt with its graph, steps,
    progress, stages, failure class)."""
    from sgvla.core.episode import EpisodeKey
    from sgvla.eval.config import EvalConfig
    from sgvla.eval.suite import SuiteConfig
    from sgvla.eval.worker import Worker
    from sgvla.policies.registry import PolicyConfig
    from sgvla.policies.tiny import build_tiny_act

    policy = build_tiny_act(tmp_path / "act")
    steps, episodes, task = 12, 2, 3
    out = tmp_path / "lerobot_eval"
    command = [str(Path(sys.executable).parent / "lerobot-eval"), "--env.type=sgvla_libero",
               "--env.context_mode=scene_graph", f"--env.task_ids=[{task}]", f"--env.episode_length={steps}",
               "--env.image_size=64", "--env.render_profile=fast", f"--env.records={out / 'episodes.jsonl'}",
               "--env.record_actions=true", f"--policy.path={policy}", "--policy.device=cpu",
               f"--eval.n_episodes={episodes}", "--eval.batch_size=1", "--seed=0", f"--output_dir={out}"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ, "MUJOCO_GL": "egl"})
    assert run.returncode == 0, run.stderr[-3000:]

    info = json.loads((out / "eval_info.json").read_text())  # LeRobot's own output
    (task_info,) = info["per_task"]
    assert (task_info["task_group"], task_info["task_id"]) == ("sgvla_libero", task)
    lerobot_success = task_info["metrics"]["successes"]
    assert len(lerobot_success) == episodes and info["overall"]["n_episodes"] == episodes
    assert len(task_info["metrics"]["video_paths"]) == episodes
    assert all(Path(p).is_file() for p in task_info["metrics"]["video_paths"])
    ours = {r["seed"]: r for r in map(json.loads, (out / "episodes.jsonl").read_text().splitlines())}

    plan = EvalConfig(suite=SuiteConfig.choice("libero_spatial")(render_profile="fast", image_size=64),
                      policies=[PolicyConfig.choice("act")(path=str(policy))], tasks=[task], modes=["scene_graph"],
                      episodes=episodes, seed_offset=0, max_steps=steps, output_dir=str(tmp_path / "sgvla_eval"))
    actions: dict[int, list] = {}

    class RecordingWorker(Worker):
        def episode(self, key):
            engine = super().episode(key)
            engine.policy = RecordedPolicy(engine.policy, actions.setdefault(key.seed, []))
            return engine

    worker = RecordingWorker(plan)
    try:
        theirs = {seed: worker.run(EpisodeKey(plan.policies[0].display_name, task, plan.perturbations, "scene_graph",
                                              seed)) for seed in plan.seeds}
    finally:
        worker.close_runner()

    assert sorted(ours) == sorted(theirs) == list(range(episodes))
    assert [theirs[s]["success"] for s in range(episodes)] == lerobot_success  # per episode, by seed
    assert [ours[s]["success"] for s in range(episodes)] == lerobot_success
    for seed in range(episodes):
        assert len(ours[seed]["actions"]) == steps
        assert ours[seed]["actions"] == actions[seed]  # the same action at every step, to the bit
        assert np.ptp(np.array(actions[seed]), axis=0).max() > 0  # and the policy does move the arm
    same = ("task_id", "perturbation", "mode", "seed", "success", "steps", "max_steps", "task", "prompt", "view",
            "graph_source", "graph_triplets", "triplets_in_prompt", "visible_objects", "progress", "stages",
            "failure_class", "failure_reason", "perturbation_applied", "render_profile")
    for seed in range(episodes):
        assert {k: ours[seed][k] for k in same} == {k: theirs[seed][k] for k in same}
        assert ours[seed]["triplets_in_prompt"] > 0 and "(target_akita_black_bowl, " in ours[seed]["prompt"]
