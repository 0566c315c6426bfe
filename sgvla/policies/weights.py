"""Weights you can trust: a learned policy is evaluated only with the weights its checkpoint holds.

LeRobot 0.6.1 does not guarantee it. `PI0Policy`/`PI05Policy.from_pretrained` catch any weight-load error (a
truncated file, a missing key, a wrong shape), print it and return the randomly initialised model; a pi0/pi05 folder
without ``model.safetensors`` loads as random weights; other types load with ``strict=False``, so a missing key
leaves its random init. A partial download would then be evaluated for hours and reported as 0%.

So before any weight is read, `check_weights` compares the checkpoint's ``model.safetensors`` header (keys and
shapes, read with `safetensors.safe_open`, which also refuses a file shorter than its header says) with the
state dict of the same policy built on the meta device (no memory, well under a second even for pi05), after the key
fixes LeRobot itself applies (pi0/pi05's `_fix_pytorch_state_dict_keys` and ``model.`` prefix) and counting tied
parameters once. Any missing, unexpected or mis-shaped key, or a file that cannot be read, is a `WeightsError`: one
line naming the file and what is wrong. A policy built with random weights on purpose (tests, benchmarks) says so
with ``random_weights: true`` in its policy entry; then the checkpoint must hold no weights at all.

`Provenance` is what a record and the run's plan keep of the weights: the file's SHA-256, and for a hub checkpoint
its id and the revision (commit) the file came from.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgvla.policies.checkpoint import checkpoint_config, checkpoint_path, is_local

WEIGHTS_FILE = "model.safetensors"  # LeRobot's SAFETENSORS_SINGLE_FILE
RANDOM_HINT = "(a policy built with random weights on purpose needs random_weights: true in its policy entry)"
_SHOWN = 3  # keys named per kind of problem; the rest are counted


class WeightsError(ValueError):
    """A checkpoint whose weights would not all reach the model: one line naming the file and what is wrong."""


@dataclass(frozen=True)
class Provenance:
    """Where a policy's weights came from: a file's SHA-256 (and hub revision), or random on purpose."""

    source: str  # the checkpoint as the plan names it: a directory or a hub id
    sha256: str | None = None  # of model.safetensors; None for random weights
    revision: str | None = None  # the hub commit the file came from; None for a local directory
    random: bool = False

    def record_facts(self) -> dict[str, Any]:
        """The fields a record carries (flat, as records' extra fields are)."""
        return {"weights_source": self.source, "weights_sha256": self.sha256, "weights_revision": self.revision,
                "random_weights": self.random}


def weights_file(path: str) -> Path | None:
    """The checkpoint's model.safetensors as LeRobot reads it (a hub id: from the hub cache, fetched if need be);
    None when the checkpoint has none."""
    if is_local(path):
        file = Path(path).expanduser() / WEIGHTS_FILE
        return file if file.is_file() else None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        return Path(hf_hub_download(repo_id=path, filename=WEIGHTS_FILE))
    except EntryNotFoundError:
        return None
    except Exception as e:  # offline and not cached, no such repo, ...
        raise WeightsError(f"{path}/{WEIGHTS_FILE}: cannot be fetched ({type(e).__name__}: "
                           f"{str(e).splitlines()[0] if str(e) else ''})") from None


def header_shapes(file: Path) -> dict[str, tuple[int, ...]]:
    """Each tensor's shape as the file's header gives it; WeightsError when the file cannot be read or is shorter
    than its header says (a truncated download)."""
    from safetensors import safe_open

    try:
        with safe_open(str(file), framework="pt") as f:
            return {key: tuple(f.get_slice(key).get_shape()) for key in f.keys()}
    except Exception as e:
        raise WeightsError(f"{file}: cannot be read: {str(e).splitlines()[0]} (truncated or not a safetensors "
                           "file); download it again") from None


def meta_model(cfg: Any) -> Any:
    """The policy `cfg` describes, built on the meta device: its parameters' names and shapes, no memory."""
    import torch
    from lerobot.policies.factory import get_policy_class

    meta_cfg = copy.copy(cfg)
    meta_cfg.device = "meta"  # policies that move themselves to their config's device stay on meta
    with torch.device("meta"):
        return get_policy_class(cfg.type)(config=meta_cfg)


def loaded_keys(model: Any, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The file's keys as LeRobot's loader hands them to the model: pi0/pi05 (and any policy with
    `_fix_pytorch_state_dict_keys`) fix the keys of older checkpoints and prefix ``model.``; others load as saved."""
    fix = getattr(model, "_fix_pytorch_state_dict_keys", None)
    if fix is None:
        return dict(shapes)
    import torch

    fixed = fix({key: torch.empty(shape, device="meta") for key, shape in shapes.items()}, model.config)
    return {(key if key.startswith("model.") else f"model.{key}"): tuple(value.shape) for key, value in fixed.items()}


def _listed(keys: list[str]) -> str:
    shown = ", ".join(keys[:_SHOWN])
    return shown + (f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")


def key_problems(model: Any, shapes: dict[str, tuple[int, ...]]) -> str:
    """What keeps the file's tensors from being exactly the model's parameters and buffers: missing, unexpected and
    mis-shaped keys ('' when none). Tied parameters (one tensor under several names) need one of their names."""
    given = loaded_keys(model, shapes)
    names: dict[int, list[str]] = {}
    state = model.state_dict(keep_vars=True)
    for key, value in state.items():
        names.setdefault(id(value), []).append(key)
    missing = [group[0] for group in names.values() if not any(key in given for key in group)]
    unexpected = sorted(key for key in given if key not in state)
    wrong = [f"{key} {list(given[key])} in the file, {list(state[key].shape)} in the model"
             for key in sorted(given) if key in state and tuple(state[key].shape) != given[key]]
    problems = []
    if missing:
        problems.append(f"{len(missing)} of the model's {len(state)} keys missing ({_listed(missing)})")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected keys ({_listed(unexpected)})")
    if wrong:
        problems.append(f"{len(wrong)} mis-shaped ({_listed(wrong)})")
    return "; ".join(problems)


def check_weights(path: str, cfg: Any, random_weights: bool = False) -> Provenance:
    """The provenance of the weights a policy loaded from `path` (its config `cfg`) will have; WeightsError (one line
    naming the file) unless every parameter comes from the checkpoint, or, with `random_weights`, none does."""
    file = weights_file(path)
    if random_weights:
        if file is not None:
            raise WeightsError(f"{file}: random_weights: true, but the checkpoint holds weights; drop "
                               "random_weights to evaluate them")
        return Provenance(source=path, random=True)
    if file is None:
        raise WeightsError(f"{Path(path).expanduser() / WEIGHTS_FILE}: missing: the checkpoint has no weights, and "
                           f"LeRobot would evaluate a randomly initialised {cfg.type} {RANDOM_HINT}")
    shapes = header_shapes(file)
    try:
        model = meta_model(cfg)
    except Exception as e:
        raise WeightsError(f"{file}: cannot check its keys against a {cfg.type} policy built from its config "
                           f"({type(e).__name__}: {e})") from None
    problems = key_problems(model, shapes)
    if problems:
        raise WeightsError(f"{file}: does not match the {cfg.type} policy of its config: {problems}")
    return Provenance(source=path, sha256=file_sha256(file), revision=hub_revision(file, path))


def hub_revision(file: Path, path: str) -> str | None:
    """The commit of a hub checkpoint's file (its folder in the hub cache, ``snapshots/<commit>/``)."""
    if is_local(path):
        return None
    parent = file.parent
    return parent.name if parent.parent.name == "snapshots" and re.fullmatch(r"[0-9a-f]{40}", parent.name) else None


def file_sha256(file: Path) -> str:
    stat = os.stat(file)
    return _sha256(str(Path(file).resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _sha256(file: str, size: int, mtime_ns: int) -> str:
    """Cached by size and modification time: a plan checked, then loaded by the same process, hashes once."""
    digest = hashlib.sha256()
    with open(file, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def checked_config(path: str, device: str, policy_type: str | None = None, random_weights: bool = False,
                   weights_sha256: str | None = None) -> tuple[Any, Provenance]:
    """The checkpoint's config (as `checkpoint_config`) with `pretrained_path` set as LeRobot's `make_policy` reads
    it (None: build at random, for `random_weights`), and the weights' `Provenance` once `check_weights` has found
    that every parameter comes from the checkpoint (WeightsError otherwise, before any weight is read);
    `weights_sha256`, when given, must be the file's."""
    import lerobot.policies  # noqa: F401  (registers every policy type's config: a plan is checked before any loads)

    path = checkpoint_path(path)
    cfg = checkpoint_config(path, device, policy_type)
    provenance = check_weights(path, cfg, random_weights)
    if weights_sha256 is not None and provenance.sha256 != weights_sha256:
        found = f"its weights' SHA-256 is {provenance.sha256}" if provenance.sha256 else "random_weights is true"
        raise WeightsError(f"{path}: weights_sha256 {weights_sha256} given, but {found}")
    cfg.pretrained_path = None if random_weights else Path(path)
    return cfg, provenance
