"""A learned policy computes on the number of torch threads its plan entry gives (`threads`), whatever the process's
environment says: float32 sums split over another number of threads round differently, and a Ray actor (where Ray
sets OMP_NUM_THREADS=1) gave a tiny ACT other actions than `sgvla eval`'s own processes (tests/eval/
test_ray_executor.py compares the two runs' action digests)."""

import pytest
import torch

import sgvla.plugins  # noqa: F401  the registered suites and policies a plan names
from sgvla.core.config import ConfigError, from_mapping
from sgvla.core.protocols import StepInput
from sgvla.eval.config import EvalConfig
from sgvla.policies.registry import make_policy


@pytest.fixture
def torch_threads():
    """torch's setting is process-wide: put it back for the tests after this one."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_each_policy_acts_on_its_own_thread_count(tiny_act_dir, libero_observations, make_prompt, torch_threads):
    observation = libero_observations(1)[0]
    actions = {}
    for threads in (1, 2, 1):
        torch.set_num_threads(3)  # what the environment would have set
        policy = make_policy("act", path=str(tiny_act_dir), threads=threads)
        policy.reset(make_prompt("none"), seed=0)
        action = policy.act(StepInput(observation=observation, prompt=make_prompt("none")))
        assert torch.get_num_threads() == threads
        actions.setdefault(threads, []).append(action)
    assert (actions[1][0] == actions[1][1]).all(), "one thread count, two different actions"


def test_a_thread_count_below_one_is_refused_when_the_plan_loads(tiny_act_dir):
    with pytest.raises(ConfigError, match="threads must be >= 1"):
        from_mapping(EvalConfig, {"name": "t", "suite": {"type": "libero_spatial"}, "output_dir": "/tmp/unused",
                                  "policies": [{"type": "act", "path": str(tiny_act_dir), "threads": 0}]})
