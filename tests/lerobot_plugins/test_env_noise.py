"""``--env.seed_noise``: a flow-matching policy draws the same noise, and so takes the same actions, in `lerobot-eval`
as in `sgvla eval` (issue 39, item 2's first check).

`sgvla eval` draws a flow-matching policy's noise from a generator seeded by each episode; LeRobot's loop draws it
from torch's global generator (`sample_noise`). With ``seed_noise`` the env seeds the global generator with the
episode's seed at every reset (`lerobot_env_sgvla.configs` says why and where it holds). Checked here: the global
draw after ``torch.manual_seed`` is sgvla's draw, chunk after chunk, bit for bit; an env's reset leaves the global
generator where that episode's first chunk needs it; what cannot match (a batch of envs, parallel tasks) is refused
in one line; and a tiny random SmolVLA (the noise mechanism of pi0 and pi05) run through the real ``lerobot-eval``
(its console script) and through `sgvla eval`'s runner gives each episode the same steps, success and action digest,
where without the option the digests differ.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lerobot.envs.factory import make_env_config
from lerobot.policies.common.flow_matching import sample_noise
from lerobot.utils.import_utils import register_third_party_plugins

register_third_party_plugins()  # what lerobot-eval does first: imports lerobot_env_sgvla by its distribution name

from lerobot_env_sgvla.env import SgvlaEnv  # noqa: E402

from sgvla.eval.compare import compare_runs, load_run  # noqa: E402
from sgvla.policies.lerobot_vla import episode_noise, seeded_generator  # noqa: E402

SHAPES = [(1, 50, 32), (1, 10, 32)]  # one chunk's noise: SmolVLA/pi0/pi05 at their defaults, the tiny models


def lerobot_draws(seed: int, shape: tuple, chunks: int) -> list[torch.Tensor]:
    """What LeRobot's loop draws for `chunks` chunks after ``torch.manual_seed(seed)`` (the global generator)."""
    return [sample_noise(shape, "cpu") for _ in range(chunks)]


def sgvla_draws(seed: int, shape: tuple, chunks: int) -> list[torch.Tensor]:
    """What `sgvla eval` draws for `chunks` chunks of the episode of `seed`."""
    generator = seeded_generator(seed)
    return [episode_noise(shape, [generator], "cpu") for _ in range(chunks)]


def test_the_global_draw_after_manual_seed_is_the_episodes_draw():
    with torch.random.fork_rng(devices=[]):  # the test process's own generator is left as it was
        for shape in SHAPES:
            for seed in (0, 1, 7, 2**40):
                torch.manual_seed(seed)
                theirs, ours = lerobot_draws(seed, shape, 3), sgvla_draws(seed, shape, 3)
                assert all(torch.equal(a, b) for a, b in zip(theirs, ours, strict=True))
                assert ours[0].dtype == torch.float32 and not torch.equal(ours[0], ours[1])
            assert not torch.equal(sgvla_draws(0, shape, 1)[0], sgvla_draws(1, shape, 1)[0])


def test_a_reset_leaves_the_global_generator_at_the_episodes_noise():
    """The SO101 twin (a quick MuJoCo scene): after ``reset(seed=s)`` the next global draws are the episode's; without
    the option the env leaves the generator alone."""
    config = make_env_config("sgvla_so101_twin", task_ids=[0], episode_length=5, image_size=64, seed_noise=True)
    env = SgvlaEnv(config, 0)
    plain = SgvlaEnv(make_env_config("sgvla_so101_twin", task_ids=[0], episode_length=5, image_size=64), 0)
    try:
        with torch.random.fork_rng(devices=[]):
            for seed in (3, 4):
                torch.manual_seed(1000)  # whatever ran before the episode
                env.reset(seed=seed)
                assert all(torch.equal(a, b) for a, b in zip(lerobot_draws(seed, SHAPES[1], 2),
                                                             sgvla_draws(seed, SHAPES[1], 2), strict=True))
            torch.manual_seed(1000)
            before = torch.random.get_rng_state()
            plain.reset(seed=3)
            assert torch.equal(torch.random.get_rng_state(), before)
    finally:
        env.close()
        plain.close()


def test_what_cannot_match_is_refused_in_one_line():
    config = make_env_config("sgvla_libero", task_ids=[0], image_size=64, seed_noise=True)
    with pytest.raises(ValueError, match=r"^seed_noise needs --eval.batch_size=1 \(got 2\): a batch of envs draws one "):
        config.create_envs(2)
    with pytest.raises(ValueError, match=r"^seed_noise needs max_parallel_tasks=1 \(got 2\)"):
        make_env_config("sgvla_libero", task_ids=[0], image_size=64, seed_noise=True, max_parallel_tasks=2)
    make_env_config("sgvla_libero", task_ids=[0], image_size=64, max_parallel_tasks=2)  # without it: LeRobot's way


def _lerobot_eval(out: Path, policy: Path, task: int, steps: int, episodes: int, *options: str) -> list[bool]:
    """One `lerobot-eval` run of a tiny policy; its eval_info.json's successes, by seed."""
    command = [str(Path(sys.executable).parent / "lerobot-eval"), "--env.type=sgvla_libero",
               "--env.context_mode=scene_graph", f"--env.task_ids=[{task}]", f"--env.episode_length={steps}",
               "--env.image_size=64", "--env.render_profile=fast", f"--env.records={out / 'episodes.jsonl'}", *options,
               f"--policy.path={policy}", "--policy.device=cpu", f"--eval.n_episodes={episodes}",
               "--eval.batch_size=1", "--seed=0", f"--output_dir={out}"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ, "MUJOCO_GL": "egl"})
    assert run.returncode == 0, run.stderr[-3000:]
    (task_info,) = json.loads((out / "eval_info.json").read_text())["per_task"]
    return task_info["metrics"]["successes"]


@pytest.mark.integration
@pytest.mark.slow
def test_a_flow_matching_policy_acts_the_same_in_both_loops(tmp_path):
    """A tiny random SmolVLA, LIBERO-Spatial task 3, seeds 0 and 1, 25 steps (three chunks of 10: the noise stream
    goes on past the first; the second episode needs its reset's seed): with ``seed_noise`` each episode has the
    steps, success and action digest it has in `sgvla eval`; without it (LeRobot's global stream) the digests differ.
    68-81 s at load average 7-8 on 2 cores (one `sgvla eval` run in process, two `lerobot-eval` processes)."""
    from sgvla.eval.config import EvalConfig
    from sgvla.eval.runner import run_plan
    from sgvla.eval.suite import SuiteConfig
    from sgvla.policies.registry import PolicyConfig
    from sgvla.policies.tiny import build_tiny_smolvla

    policy = build_tiny_smolvla(tmp_path / "smolvla")
    task, steps, episodes = 3, 25, 2
    plan = EvalConfig(suite=SuiteConfig.choice("libero_spatial")(render_profile="fast", image_size=64),
                      policies=[PolicyConfig.choice("smolvla")(path=str(policy))], tasks=[task], modes=["scene_graph"],
                      episodes=episodes, max_steps=steps, output_dir=str(tmp_path / "sgvla"))
    assert run_plan(plan, progress=False).complete
    seeded = _lerobot_eval(tmp_path / "seeded", policy, task, steps, episodes, "--env.seed_noise=true")
    unseeded = _lerobot_eval(tmp_path / "global", policy, task, steps, episodes)

    ours = load_run(tmp_path / "sgvla")
    same = compare_runs(ours, load_run(tmp_path / "seeded" / "episodes.jsonl"))
    assert same.matched == episodes and not same.differing and not same.actions_unchecked
    assert same.plan_differences == []
    assert seeded == [r["success"] for r in sorted(ours.records.values(), key=lambda r: r["seed"])]
    digests = {r["action_digest"] for r in ours.records.values()}
    assert len(digests) == episodes  # each episode's own noise: the digests tell the seeds apart

    other = compare_runs(ours, load_run(tmp_path / "global" / "episodes.jsonl"))  # the same episodes...
    assert other.matched == len(unseeded) == episodes and not other.plan_differences
    assert len(other.differing) == episodes  # ...each acted on other noise
    assert all("action_digest" in d.fields for d in other.differing)
