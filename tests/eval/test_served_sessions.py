"""A worker's session on the policy server closes when its episode's record is taken: the server's batches wait for
the steps of every open session (up to `max_wait_ms`), so a session left open by a worker between episodes (one
rebuilding its simulator for the next task) would hold every other worker's steps for the whole wait.

Real parts throughout: the plan's `PolicyServer` and two `Worker`s (SO101 twin simulators) in this process, the
workers reaching the server through the same `call_server`/`answer` halves every transport uses."""

import time

import pytest

import sgvla.plugins  # noqa: F401
from sgvla.core.config import from_mapping
from sgvla.eval.config import EvalConfig
from sgvla.eval.order import plan
from sgvla.eval.worker import Worker
from sgvla.policies.serving.plan import build_policy_server
from sgvla.policies.serving.remote import answer, call_server

pytestmark = pytest.mark.sim

MAX_WAIT_MS = 1000.0


class InProcess:
    """The way to a `PolicyServer` of this process: an endpoint whose client is itself."""

    def __init__(self, server):
        self.server = server

    def client(self) -> "InProcess":
        return self

    def call(self, policy: str, session: str, method: str, *args):
        return call_server(lambda: answer(self.server, policy, session, method, args), self.close, (), "in process",
                           method)

    def close(self) -> None:
        pass


def test_a_session_closes_when_its_record_is_taken_so_batches_do_not_wait_for_it(tmp_path):
    cfg = from_mapping(EvalConfig, dict(
        name="sessions", suite={"type": "so101_twin"}, policies=[{"type": "prompt_grounded"}], tasks=[0],
        modes=["standard"], episodes=2, max_steps=20, workers=2, render_images=False, output_dir=str(tmp_path),
        policy_server={"serve": "all", "max_batch": 8, "max_wait_ms": MAX_WAIT_MS}))
    first, second = plan(cfg)
    server = build_policy_server(cfg)
    workers = [Worker(cfg, InProcess(server)) for _ in range(2)]
    try:
        record = workers[0].run(first)
        assert record["steps"] > 0
        assert server.stats()["prompt_grounded"]["open_sessions"] == 0  # taken: closed, the worker still up

        started = time.monotonic()
        record = workers[1].run(second)  # the first worker idles between episodes meanwhile
        took = time.monotonic() - started
        stats = server.stats()["prompt_grounded"]
        assert stats["open_sessions"] == 0
        assert set(stats["batch_sizes"]) == {1}, stats  # alone in every batch
        # Each step went at once: had the idle worker's session stayed open, each would have waited MAX_WAIT_MS.
        assert took < record["steps"] * MAX_WAIT_MS / 1000 / 2, (took, record["steps"])
    finally:
        for worker in workers:
            worker.close_runner()
        server.close()
