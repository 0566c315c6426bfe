"""One copy of a policy serving many episodes: batched steps equal batch-of-one steps, sessions stay apart, and a
lost server is an infrastructure failure.

Tiny random LeRobot policies (built here) stand in for real checkpoints; the server runs in a real process behind
its Unix socket, as `sgvla eval` runs it."""

import threading
from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from sgvla.core.protocols import PolicyGaveUp, StepInput
from sgvla.policies.registry import make_policy
from sgvla.policies.serving.local import LocalServer
from sgvla.policies.serving.remote import PolicyServerLost, RemotePolicy, RemotePolicyError
from sgvla.policies.serving.server import PolicyServer

STEPS = 13  # more than one chunk of the tiny policies (10 actions each)


def _episodes(libero_observations, make_prompt, n: int) -> list[tuple[int, str, list]]:
    """(seed, prompt, observations) of `n` episodes that differ in all three."""
    prompts = [make_prompt(None), make_prompt("filtered"), make_prompt("full")]
    return [(seed, prompts[seed % 3], libero_observations(STEPS, seed=seed)) for seed in range(n)]


def _alone(policy, episode) -> np.ndarray:
    seed, prompt, observations = episode
    policy.reset(prompt, seed=seed)
    return np.stack([policy.act(StepInput(obs, prompt)) for obs in observations])


@pytest.mark.parametrize("kind", ["act", "smolvla"])
def test_a_batch_of_episodes_acts_as_each_episode_alone(kind, request, libero_observations, make_prompt):
    policy = make_policy(kind, path=str(request.getfixturevalue(f"tiny_{kind}_dir")))
    episodes = _episodes(libero_observations, make_prompt, 3)
    alone = [_alone(policy, e) for e in episodes]

    sessions = [policy.open_session() for _ in episodes]
    for session, (seed, prompt, _) in zip(sessions, episodes):
        policy.reset_session(session, prompt, seed)
    batched = [[] for _ in episodes]
    for t in range(STEPS):
        steps = [StepInput(obs[t], prompt) for _, prompt, obs in episodes]
        for row, action in enumerate(policy.act_batch(sessions, steps)):
            batched[row].append(action)
    for one, many in zip(alone, batched):
        np.testing.assert_allclose(np.stack(many), one, rtol=1e-4, atol=1e-5)
    if kind == "smolvla":  # the noise is the episode's: other seeds give other actions
        assert not np.allclose(alone[0], alone[1])


def test_the_session_path_is_lerobots_select_action(tiny_act_dir, libero_observations, make_prompt):
    """ACT is deterministic: per-session queues over predict_action_chunk give select_action's actions exactly."""
    from lerobot.envs.utils import preprocess_observation
    from lerobot.utils.constants import ACTION

    from sgvla.policies.lerobot_vla import _batched

    policy = make_policy("act", path=str(tiny_act_dir))
    episode = _episodes(libero_observations, make_prompt, 1)[0]
    ours = _alone(policy, episode)
    policy.policy.reset()
    theirs = []
    with torch.no_grad():
        for obs in episode[2]:
            batch = preprocess_observation(_batched(obs))
            batch["task"] = [episode[1]]
            batch = policy.preprocessor(policy.env_preprocessor(batch))
            with torch.inference_mode():
                action = policy.postprocessor(policy.policy.select_action(batch))
            theirs.append(policy.env_postprocessor({ACTION: action})[ACTION].numpy()[0])
    np.testing.assert_array_equal(ours, np.stack(theirs))


def test_concurrent_episodes_share_forward_passes(tiny_smolvla_dir, libero_observations, make_prompt):
    """Four episodes in four threads through one server, all open before the first step: every step of the four is
    one forward pass of four (a batch waits for every open episode), and each gets the actions it gets alone."""
    episodes = _episodes(libero_observations, make_prompt, 4)
    alone = [_alone(make_policy("smolvla", path=str(tiny_smolvla_dir)), e) for e in episodes]
    server = PolicyServer({"smolvla": lambda: make_policy("smolvla", path=str(tiny_smolvla_dir))},
                          max_batch=4, max_wait_ms=60_000)
    got: dict[int, np.ndarray] = {}
    all_open = threading.Barrier(4, timeout=60)

    class Direct:
        def call(self, *args):
            return server.call(*args)

    def run(i: int) -> None:
        seed, prompt, observations = episodes[i]
        policy = RemotePolicy("smolvla", Direct())
        policy.reset(prompt, seed=seed)
        all_open.wait()
        got[i] = np.stack([policy.act(StepInput(obs, prompt)) for obs in observations])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stats = server.stats()["smolvla"]
    server.close()
    for i in range(4):
        np.testing.assert_allclose(got[i], alone[i], rtol=1e-4, atol=1e-5)
    assert stats["batch_sizes"] == {4: STEPS}, stats


def _plan(tmp_path, **policy) -> "EvalConfig":  # noqa: F821
    import sgvla.plugins  # noqa: F401
    from sgvla.core.config import from_mapping
    from sgvla.eval.config import EvalConfig

    return from_mapping(EvalConfig, {"policies": [policy], "tasks": [0], "episodes": 1, "output_dir": str(tmp_path),
                                     "policy_server": {"serve": "all"}})


@pytest.mark.integration
def test_a_served_policy_gives_up_fails_and_is_lost_as_in_process(tmp_path):
    """Through the local transport: giving up stays the policy's (PolicyGaveUp), its error comes back with the
    server's traceback, and a killed server is a PolicyServerLost until a restarted one answers again."""
    from sgvla.policies.serving.plan import build_policy_server

    empty = SimpleNamespace(objects=())  # a perceived scene without the bowls the prompt names
    with LocalServer(partial(build_policy_server, _plan(tmp_path, type="prompt_grounded"))) as server:
        policy = RemotePolicy("prompt_grounded", server.endpoint.client())
        policy.reset("pick up the black bowl and place it on the plate", seed=0)
        with pytest.raises(PolicyGaveUp, match="none of akita_black_bowl_1, akita_black_bowl_2 in the scene"):
            policy.act(StepInput({}, "pick up the black bowl", empty, {"table_center": np.zeros(3)}))
        policy.reset("pick up the black bowl", seed=1)
        with pytest.raises(RemotePolicyError, match="AttributeError(.|\n)*in the policy server"):
            policy.act(StepInput({}, "pick up the black bowl", None, {}))

        assert server.alive()
        server.process.kill()
        server.process.join(10)
        assert not server.alive()  # what the scheduler asks of a ServerHandle before it restarts one
        with pytest.raises(PolicyServerLost, match="policy server"):
            policy.reset("pick up the black bowl", seed=2)
        server.restart()
        assert server.alive() and server.restarts == 1
        policy.reset("pick up the black bowl", seed=3)  # the same client reconnects to the new server
        assert policy.prompt_budget("pick up the black bowl") is None


@pytest.mark.integration
def test_a_server_whose_policy_cannot_be_built_says_why(tmp_path):
    from sgvla.policies.serving.plan import build_policy_server

    plan = _plan(tmp_path, type="act", path=str(tmp_path / "missing"))
    with pytest.raises(RuntimeError, match="could not build its policies: FileNotFoundError: policy directory"):
        LocalServer(partial(build_policy_server, plan)).start()
