"""Counterbalanced episode order: the context modes interleaved so that drift over a run cannot favour one mode.

On a physical arm a run takes hours: lighting changes, the gripper's pads wear, the operator tires. With the
matched order of `sgvla.eval.runner.plan` (every mode of a (task, seed) back to back, always in the plan's mode
order) the first mode would always run first after each scene set-up. Here every (task, seed) block still holds
all its modes (and policies) back to back, so a block is one scene set-up and its episodes stay matched pairs, but
the modes' order inside a block follows a seeded ABBA scheme: blocks come in pairs, the first of a pair takes a
random permutation of the modes and the second its reverse, so over each pair every mode's mean position in the
block is the same (a linear drift is cancelled pair by pair), and which mode leads changes from pair to pair at
random. Blocks themselves keep the plan's order (tasks, then seeds), so resuming never reorders what is left.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from sgvla.core.episode import EpisodeKey


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
