"""The episodes of a plan in the order they run (`plan`), and which of them a shard holds.

Counterbalanced episode order: the context modes interleaved so that drift over a run cannot favour one mode.

On a physical arm a run takes hours: lighting changes, the gripper's pads wear, the operator tires. With the
matched order of `plan` (every mode of a (task, seed) back to back, always in the plan's mode
order) the first mode would always run first after each scene set-up. Here every (task, seed) block still holds
all its modes (and policies) back to back, so a block is one scene set-up and its episodes stay matched pairs, but
the modes' order inside a block follows a seeded ABBA scheme: blocks come in pairs, the first of a pair takes a
random permutation of the modes and the second its reverse, so over each pair every mode's mean position in the
block is the same (a linear drift is cancelled pair by pair), and which mode leads changes from pair to pair at
random. Blocks themselves keep the plan's order (tasks, then seeds), so resuming never reorders what is left.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from sgvla.core.episode import EpisodeKey
from sgvla.eval.config import EvalConfig


def counterbalanced(keys: Sequence[EpisodeKey], modes: Sequence[str], seed: int = 0) -> list[EpisodeKey]:
    """`keys` (the plan's matched order) with each (task, perturbation, seed) block's modes in ABBA order.

    Deterministic in `seed`; a permutation of `keys`; within a mode, policies keep their plan order."""
    unknown = sorted({k.mode for k in keys} - set(modes))
    if unknown:
        raise ValueError(f"episode modes {unknown} are not among the plan's modes {list(modes)}")
    blocks: dict[tuple, list[EpisodeKey]] = {}
    for key in keys:
        blocks.setdefault((key.task_id, key.perturbation, key.seed), []).append(key)
    rng = random.Random(seed)
    out: list[EpisodeKey] = []
    order: list[str] = list(modes)
    for index, block in enumerate(blocks.values()):
        if index % 2 == 0:
            order = list(modes)
            rng.shuffle(order)
        else:
            order = order[::-1]
        rank = {mode: i for i, mode in enumerate(order)}
        out += sorted(block, key=lambda k: rank[k.mode])  # stable: policies keep their order within a mode
    return out


def plan(cfg: EvalConfig, all_shards: bool = False) -> list[EpisodeKey]:
    """Matched order: for each task and seed, every mode and policy back to back (a policy with `max_tasks` or
    `max_episodes` of its own only in the first blocks); with `order: counterbalanced`
    the modes of each such block in a seeded ABBA order (`sgvla.eval.order`). Of those, the episodes of the plan's
    `shard` (whole blocks, dealt round-robin: below), or with `all_shards` every one (what `sgvla
    merge` checks the shards against)."""

    keys = [EpisodeKey(p.display_name, task, cfg.perturbations, mode, seed)
            for t, task in enumerate(cfg.tasks) for s, seed in enumerate(cfg.seeds) for mode in cfg.modes
            for p in cfg.policies if p.runs(t, s)]
    if cfg.order == "counterbalanced":  # before sharding: a block's ABBA order does not depend on the shards
        keys = counterbalanced(keys, cfg.modes, cfg.seed_offset)
    return keys if all_shards else shard_keys(keys, *cfg.shard_index_count)


# -- shards: a plan in N parts for a batch scheduler's array (sgvla.eval.shards merges them) ------------


def block(key: EpisodeKey) -> tuple:
    """The matched block of an episode: what its other modes and policies share (one scene set-up)."""
    return key.task_id, key.perturbation, key.seed


def shard_index(keys: Iterable[EpisodeKey], count: int) -> dict[EpisodeKey, int]:
    """The shard of every episode among `count`: block k (in order of first appearance) goes to shard k mod count."""
    blocks: dict[tuple, int] = {}
    return {key: blocks.setdefault(block(key), len(blocks)) % count for key in keys}


def shard_keys(keys: Sequence[EpisodeKey], index: int, count: int) -> list[EpisodeKey]:
    """The episodes of shard `index` of `count`, in the order of `keys` (a plan: `plan`)."""
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard {index}/{count}: need count >= 1 and 0 <= index < count")
    home = shard_index(keys, count)
    return [key for key in keys if home[key] == index]
