"""The counterbalanced episode order (sgvla.eval.order): every episode once, blocks kept, modes balanced."""

from collections import Counter

import pytest

from sgvla.core.episode import EpisodeKey
from sgvla.eval.order import counterbalanced

MODES = ["standard", "scene_graph"]


def matched(tasks=(0, 1, 2), seeds=(0, 1, 2, 3), modes=MODES, policies=("hold", "other")):
    return [EpisodeKey(p, t, "none", m, s) for t in tasks for s in seeds for m in modes for p in policies]


def blocks(keys):
    out = {}
    for k in keys:
        out.setdefault((k.task_id, k.perturbation, k.seed), []).append(k)
    return list(out.values())


def test_a_permutation_with_blocks_and_policies_kept():
    keys = matched()
    order = counterbalanced(keys, MODES, seed=7)
    assert sorted(order) == sorted(keys) and len(set(order)) == len(keys)
    assert [b[0][1:3] for b in blocks(order)] == [b[0][1:3] for b in blocks(keys)]  # blocks in plan order
    for block in blocks(order):  # a block is contiguous: one scene set-up, its episodes matched pairs
        assert len(block) == len(MODES) * 2
        for mode in MODES:
            assert [k.policy for k in block if k.mode == mode] == ["hold", "other"]


def test_abba_pairs_balance_every_modes_position():
    for modes in (MODES, ["standard", "scene_graph", "scene_graph_full"]):
        keys = matched(modes=modes, policies=("hold",))
        order = counterbalanced(keys, modes, seed=3)
        bs = blocks(order)
        assert len(bs) % 2 == 0
        for first, second in zip(bs[::2], bs[1::2], strict=True):
            assert [k.mode for k in second] == [k.mode for k in first][::-1]
            position = Counter()
            for block in (first, second):
                for i, k in enumerate(block):
                    position[k.mode] += i
            assert len(set(position.values())) == 1, position  # the same summed position for every mode
        leads = Counter(b[0].mode for b in bs)
        assert max(leads.values()) - min(leads.values()) <= len(bs) // 2  # pairs split the lead between modes


def test_seeded_and_varied():
    keys = matched(tasks=range(5), seeds=range(6), policies=("hold",))
    assert counterbalanced(keys, MODES, seed=1) == counterbalanced(keys, MODES, seed=1)
    leads = {tuple(b[0].mode for b in blocks(counterbalanced(keys, MODES, seed=s))[::2]) for s in range(8)}
    assert len(leads) > 1  # the seed decides which mode leads each pair
    firsts = [b[0].mode for b in blocks(counterbalanced(keys, MODES, seed=1))[::2]]
    assert set(firsts) == set(MODES)  # not the same mode leading every pair


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="not among the plan's modes"):
        counterbalanced(matched(), ["standard"])


def test_a_plan_with_order_counterbalanced_runs_in_that_order(tmp_path):
    import sgvla.plugins  # noqa: F401
    from sgvla.core.config import from_mapping
    from sgvla.eval.config import EvalConfig
    from sgvla.eval.runner import plan

    data = {"suite": {"type": "so101_twin"}, "tasks": [0, 1], "episodes": 2, "perturbations": "none",
            "output_dir": str(tmp_path)}
    cfg = from_mapping(EvalConfig, {**data, "order": "counterbalanced"})
    matched_plan = plan(from_mapping(EvalConfig, data))
    assert plan(cfg) == counterbalanced(matched_plan, cfg.modes, cfg.seed_offset) != matched_plan
    with pytest.raises(ValueError, match="order"):
        from_mapping(EvalConfig, {**data, "order": "random"})
