"""`executor` is a registered choice carrying its own options (Ray's under it), like suites and policies: a plan
names it (`executor: ray`, `executor.address=HEAD:6379`), a bad name or option fails when the plan loads with one
line naming it and the valid ones, and a plan stored before (`ray:` beside `executor: ray`) still reads."""

import pytest

import sgvla.plugins  # noqa: F401
from sgvla.core.config import ConfigError, load_config, parse_items
from sgvla.eval.config import EvalConfig, upgrade_stored
from sgvla.eval.executor import ExecutorConfig, LocalExecutor, RayExecutor
from sgvla.policies.serving.plan import served_policies

PLAN = "config/eval/default.yaml"


def load(*items: str) -> EvalConfig:
    return load_config(EvalConfig, PLAN, parse_items(items))


def test_the_executor_and_its_options_come_from_the_plan():
    assert ExecutorConfig.choices() == {"local": LocalExecutor, "ray": RayExecutor}
    assert isinstance(load().executor, LocalExecutor)
    ray = load("executor=ray", "executor.address=10.0.0.1:6379", "executor.cpus_per_worker=2").executor
    assert (ray.type, ray.address, ray.cpus_per_worker, ray.placement_timeout_s) == ("ray", "10.0.0.1:6379", 2.0, 120.0)


@pytest.mark.parametrize("items, message", [
    (["executor=slurm"], "unknown executor 'slurm'; choose from ['local', 'ray']"),
    (["executor.address=HEAD:6379"], "executor(local): unknown key(s) address; it takes no options"),
    (["executor=ray", "executor.cpus_per_worker=0"], "executor.cpus_per_worker must be > 0, got 0"),
    (["executor=ray", "executor.placement_timeout_s=-1"], "executor.placement_timeout_s must be > 0, got -1"),
    (["executor=ray", "executor.address=''"], "executor.address is empty"),
    (["ray.address=HEAD:6379"], "ray: the Ray settings moved under executor: `executor: {type: ray"),
])
def test_a_bad_executor_fails_when_the_plan_loads_with_one_line(items, message):
    with pytest.raises(ConfigError) as error:
        load(*items)
    assert message in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_auto_serves_learned_policies_unless_every_episode_runs_in_this_process(tmp_path):
    act = f"policies=[{{type: act, path: {tmp_path}, name: act}}]"
    assert served_policies(load(act, "workers=1")) == []
    assert served_policies(load(act, "workers=2")) == ["act"]
    assert served_policies(load(act, "workers=1", "executor=ray")) == ["act"]  # its worker is an actor


def test_a_plan_stored_before_the_executor_carried_its_options_still_reads():
    old = {"executor": "ray", "ray": {"address": "10.0.0.1:6379", "cpus_per_worker": 2.0}, "workers": 4}
    assert upgrade_stored(old) == {"executor": {"type": "ray", "address": "10.0.0.1:6379", "cpus_per_worker": 2.0},
                                   "workers": 4}
    assert upgrade_stored({"executor": "local", "ray": {"address": "auto"}}) == {"executor": "local"}
