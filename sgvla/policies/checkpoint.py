"""Opening a LeRobot checkpoint, the one way for every embodiment: where it is (a local directory or a hub id),
its config with the device overridden (as `lerobot-eval --policy.device=...` does), its type checked before any
weight is read, the processor overrides that put the processors on the same device, and LeRobot's prints while it
loads kept off sgvla's stdout."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def is_local(path: str) -> bool:
    """A path, not a hub id (`owner/name`): it exists, or it cannot be a hub id."""
    return Path(path).expanduser().exists() or path.startswith(("/", ".", "~")) or path.count("/") != 1


def checkpoint_path(path: str | Path) -> str:
    """`path` as LeRobot reads it: a local directory expanded (FileNotFoundError when it is missing), or a hub id."""
    path = str(path)
    if not is_local(path):
        return path
    if not Path(path).expanduser().is_dir():
        raise FileNotFoundError(f"policy directory {path} does not exist (a hub id reads owner/name)")
    return str(Path(path).expanduser())


def checkpoint_config(path: str, device: str, policy_type: str | None = None) -> Any:
    """The checkpoint's PreTrainedConfig on `device`; ValueError when `policy_type` is given and differs."""
    from lerobot.configs import PreTrainedConfig

    cfg = PreTrainedConfig.from_pretrained(path, cli_overrides=[f"--device={device}"])
    if policy_type is not None and cfg.type != policy_type:
        raise ValueError(f"policy type {policy_type!r} given, but {path} holds a {cfg.type!r} policy")
    return cfg


def processor_overrides(device: str) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Pre- and postprocessor overrides: the device's, and no observation renaming (sgvla names features as the
    checkpoint does)."""
    on_device = {"device": str(device)}
    return ({"device_processor": on_device, "rename_observations_processor": {"rename_map": {}}},
            {"device_processor": dict(on_device)})


def use_threads(threads: int) -> None:
    """Compute this process's torch CPU work on `threads` intra-op threads (a policy's `threads`), before each
    forward pass.

    Why fixed, and not the machine's default: a float32 sum split over N threads rounds differently for each N, so
    the same weights and inputs give actions ~1e-8 apart, and closed-loop episodes that part (the action digest sees
    it). torch's default follows the process's environment: all cores in `sgvla eval`'s own processes, one in a Ray
    actor (Ray sets OMP_NUM_THREADS=1 there), which made a tiny ACT's digests differ between a local and a Ray run
    of one plan. With the number in the plan every executor computes alike. Process-wide, as torch's setting is;
    set only when it differs (a change rebuilds torch's thread pool)."""
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@contextmanager
def lerobot_prints(what: str) -> Iterator[None]:
    """Run LeRobot's loading code with what it prints (``from_pretrained``'s "Loading weights from local directory",
    pi0/pi05's report of the keys it loaded, SmolVLA's "Loading ... weights") moved off stdout, line by line,
    prefixed by `what`: sgvla's stdout carries a run's progress and summary, which these lines broke up. They go to
    this module's logger (INFO; `sgvla eval` logs to stderr) where logging is set up, else straight to stderr (a
    pool worker, a node), so nothing LeRobot says is lost; sgvla checks the weights itself before LeRobot reads
    them (`sgvla.policies.weights`).

    Python-level prints only (LeRobot's are). The swap of `sys.stdout` is process-wide: a print by another thread
    meanwhile goes the same way."""
    buffer = io.StringIO()
    try:
        with redirect_stdout(buffer):
            yield
    finally:
        lines = [line for line in buffer.getvalue().splitlines() if line.strip()]
        for line in lines:
            if log.hasHandlers() and log.isEnabledFor(logging.INFO):
                log.info("%s: %s", what, line)
            else:
                print(f"{what}: {line}", file=sys.stderr, flush=True)


@contextmanager
def built_in_dtype(cfg: Any) -> Iterator[None]:
    """Build a policy whose config asks for bfloat16 (pi0, pi05: ``dtype``) in bfloat16: LeRobot builds them in
    float32 and converts after, a peak of 15.4 GiB for pi05 where the model holds 8.7 GiB. Only for making a random
    checkpoint to save (`sgvla.policies.tiny`): the parts LeRobot keeps in float32 outside PaliGemma (action_in_proj,
    ...) come out bfloat16 here, so a policy built this way cannot run; loading the saved file into LeRobot's own
    build casts them back."""
    import torch

    if getattr(cfg, "dtype", None) != "bfloat16":
        yield
        return
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)
