"""`executor: ray` on a cluster that cannot place a simulator worker: once no worker of the run is up and one has
waited `executor.placement_timeout_s` to be placed, the run stops with one line saying what could not be placed and
what to do, rather than waiting forever; records already written stay. A real two-node Ray cluster (head 2 CPUs,
second node 1 CPU, both on 127.0.0.1), run inside the loopback-only network namespace as
tests/eval/test_ray_executor.py does (its fixtures are used here)."""

import logging
import time

import pytest

import sgvla.plugins  # noqa: F401
from sgvla.eval.runner import plan, run_plan

from .plans import records_by_key, run_with
from . import test_ray_executor as ray_cluster
from .test_ray_executor import _plan, in_loopback_namespace

cluster, namespace_outcomes = ray_cluster.cluster, ray_cluster.namespace_outcomes  # its fixtures, for this module

pytestmark = [pytest.mark.sim, pytest.mark.slow, pytest.mark.integration]  # a Ray cluster (tests/tiers.py)

TIMEOUT_S = 4.0


@in_loopback_namespace
def test_a_worker_no_node_can_hold_stops_the_run_at_the_deadline(cluster, tmp_path):
    """Three CPUs per worker, and no node has three: the run stops after the deadline, saying so, with nothing run."""
    cfg = _plan(tmp_path, [{"type": "prompt_grounded"}], episodes=1, workers=1,
                executor={"type": "ray", "address": cluster.address, "cpus_per_worker": 3.0,
                          "placement_timeout_s": TIMEOUT_S})
    started = time.monotonic()
    summary = run_plan(cfg, progress=False)
    took = time.monotonic() - started
    assert summary.recorded == 0 and summary.not_run == len(plan(cfg)), summary
    assert (f"the Ray cluster at executor.address={cluster.address} placed no simulator worker within "
            f"executor.placement_timeout_s={TIMEOUT_S:g} s (1 waiting, executor.cpus_per_worker=3 CPUs each on one "
            "node; the cluster has 2 live node(s), 3 CPUs in all, 3 free); add a node") in summary.stopped, \
        summary.stopped
    assert "lower executor.cpus_per_worker, or raise executor.placement_timeout_s" in summary.stopped
    assert TIMEOUT_S <= took < TIMEOUT_S + 60, took  # Ray's connect and shutdown take seconds on a loaded machine


@in_loopback_namespace
def test_a_lost_worker_whose_replacement_cannot_be_placed_stops_the_run_and_keeps_its_records(cluster, tmp_path):
    """An actor holds the head's two CPUs, so the run's one worker goes to the second node, which is killed once an
    episode is recorded: the replacement has nowhere to go. The run stops at the deadline; the record stays, the lost
    episode is an infrastructure failure, the rest are not run (a rerun runs them: test_ray_executor's lost node). Runs
    last: the cluster keeps the head only."""
    import ray

    from sgvla.policies.serving.ray import NAMESPACE

    cfg = _plan(tmp_path, [{"type": "prompt_grounded"}], episodes=4, max_steps=40, workers=1,
                executor={"type": "ray", "address": cluster.address, "cpus_per_worker": 1.0,
                          "placement_timeout_s": TIMEOUT_S})
    ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.ERROR)

    @ray.remote(num_cpus=2)
    class Hog:
        def ready(self) -> bool:
            return True

    hog = Hog.remote()
    ray.get(hog.ready.remote(), timeout=60)  # placed: the head has no CPU left
    killed = []

    def kill_second_node() -> bool:  # the worker's node: its next episode, or the one it runs, is lost
        cluster.second.kill()
        killed.append(time.monotonic())
        return True

    try:
        first = run_with(cfg, kill_second_node)  # RayPool uses this process's connection and leaves it open
        assert killed, "no episode was recorded"
        assert first.recorded >= 1 and "placed no simulator worker within" in first.stopped, first
        assert "1 live node(s), 2 CPUs in all, 0 free" in first.stopped, first.stopped
        kinds = [r["kind"] for r in first.outstanding.values()]
        assert kinds == ["worker_lost"], first.outstanding
        assert len(records_by_key(tmp_path)) == first.recorded  # what was recorded stays, once each
        assert first.recorded + len(kinds) + first.not_run == len(plan(cfg)) and first.not_run, first
    finally:
        ray.shutdown()
