"""Where a plan's episodes run: the `executor`, a registered choice with its own options, like suites and policies.

    executor: local                                   # this machine: `workers` simulator processes (1: in process)
    executor: {type: ray, address: HEAD:6379}         # actors of a Ray cluster, with Ray's options

Each executor makes the run's worker pool (`sgvla.eval.pool.WorkerPool`), which the one scheduling loop
(`sgvla.eval.schedule`) feeds; nothing else asks which executor a plan has. A bad executor or option fails when the
plan loads, with the valid ones in the message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sgvla.core.registry import Choice

if TYPE_CHECKING:
    from sgvla.eval.pool import WorkerPool


@dataclass
class ExecutorConfig(Choice, kind="executor"):
    """Base of the registered executors; options are the subclass's fields (e.g. Ray's cluster address)."""

    def in_one_process(self, workers: int) -> bool:
        """Whether every episode runs in the command's own process (then a policy server shares nothing)."""
        return False

    def pool(self, cfg: Any) -> WorkerPool:
        """The run's simulator workers for the plan `cfg`, not started yet."""
        raise NotImplementedError


@ExecutorConfig.register("local")
@dataclass
class LocalExecutor(ExecutorConfig):
    """This machine: one worker runs in the command's process, more each in a process of its own."""

    def in_one_process(self, workers: int) -> bool:
        return workers == 1

    def pool(self, cfg: Any) -> WorkerPool:
        from sgvla.eval.pool import InlinePool, ProcessPool

        return InlinePool(cfg) if cfg.workers == 1 else ProcessPool(cfg)


@ExecutorConfig.register("ray")
@dataclass
class RayExecutor(ExecutorConfig):
    """Simulator workers as actors of a Ray cluster (`sgvla.eval.ray_executor`)."""

    address: str = "auto"  # a running cluster (`ray start --head` on one machine, `ray start --address` on others)
    cpus_per_worker: float = 1.0  # CPUs Ray reserves for each simulator worker
    gpus_per_server: float | None = None  # GPUs for the policy server; None: 1 when a served policy's device is cuda
    # Seconds a simulator worker may wait for the cluster to place it (its CPUs free on some node) while no worker of
    # the run is up: then the run stops, saying what could not be placed, rather than waiting forever.
    placement_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        if not self.address:
            raise ValueError("executor.address is empty: the cluster's address (host:port), or auto for the one "
                             "started on this machine with `ray start --head`")
        if self.cpus_per_worker <= 0:
            raise ValueError(f"executor.cpus_per_worker must be > 0, got {self.cpus_per_worker}")
        if self.gpus_per_server is not None and self.gpus_per_server < 0:
            raise ValueError(f"executor.gpus_per_server must be >= 0, got {self.gpus_per_server}")
        if not self.placement_timeout_s > 0:
            raise ValueError(f"executor.placement_timeout_s must be > 0, got {self.placement_timeout_s}")

    def pool(self, cfg: Any) -> WorkerPool:
        from sgvla.eval.ray_executor import RayPool

        return RayPool(cfg)
