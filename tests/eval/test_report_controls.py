"""The report's comparisons: every mode vs standard and scene_graph vs each control, exact McNemar with Holm-Bonferroni
over a policy's comparisons, progress with paired bootstrap intervals and the Wilcoxon signed-rank test, failure
classes; and the statistics behind them. Synthetic records only."""

import csv
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from sgvla.core.context import ContextMode
from sgvla.core.stats import holm, mcnemar_exact, paired_bootstrap, wilcoxon_signed_rank
from sgvla.eval.report import (COMPARISON_COLUMNS, _labels, comparisons, csv_rows, is_control, markdown_table,
                               planned_comparisons, short, write_report)

# -- statistics ------------------------------------------------------------------------------------------------------


def test_holm_by_hand():
    # sorted: 0.005 x4 = 0.02, 0.01 x3 = 0.03, 0.03 x2 = 0.06, 0.04 x1 = 0.04 -> 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    assert holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])  # ties get the same value
    assert holm([0.3]) == [0.3] and holm([]) == []
    ps = list(np.random.default_rng(3).random(12) ** 3)
    adjusted = holm(ps)
    assert all(a >= p for a, p in zip(adjusted, ps)) and max(adjusted) <= 1
    ranked = sorted(range(12), key=ps.__getitem__)
    assert all(adjusted[i] <= adjusted[j] for i, j in zip(ranked, ranked[1:]))  # monotone in the raw order
    with pytest.raises(ValueError, match="within"):
        holm([0.1, float("nan")])


def test_paired_bootstrap_contains_the_mean_and_is_seeded():
    rng = np.random.default_rng(7)
    reference, treatment = rng.random(40), np.clip(rng.random(40) + 0.2, 0, 1)
    pairs = list(zip(reference, treatment))
    mean, low, high = paired_bootstrap(pairs, n=4000, seed=1)
    assert mean == pytest.approx(float(np.mean(treatment - reference)))
    assert low < mean < high
    assert paired_bootstrap(pairs, n=4000, seed=1) == (mean, low, high)  # deterministic per seed
    assert paired_bootstrap(treatment - reference, n=4000, seed=1) == (mean, low, high)  # pairs or differences
    assert paired_bootstrap(pairs, n=4000, seed=2) != (mean, low, high)
    wide = paired_bootstrap(pairs, n=4000, seed=1, confidence=0.99)
    assert wide.low <= low and wide.high >= high
    assert paired_bootstrap([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)
    assert all(np.isnan(paired_bootstrap([])))


def test_wilcoxon_by_hand():
    assert wilcoxon_signed_rank([1, 2, 3]) == pytest.approx(0.25)  # T+ = 6 is the largest of 2^3 sign patterns
    # T+ = 4; the sums of the 8 subsets of ranks {1, 2, 3}: 0 1 2 3 3 4 5 6, so P(T+ >= 4) = 3/8, doubled
    assert wilcoxon_signed_rank([1, -2, 3]) == pytest.approx(0.75)
    assert wilcoxon_signed_rank([0, 1, 2, 3]) == pytest.approx(0.25)  # wilcox: the zero is dropped
    # zsplit: ranks 1 (the zero), 2, 3, 4; the signs of 2, 3, 4 vary: all positive is 1 of 8
    assert wilcoxon_signed_rank([0, 1, 2, 3], zero_method="zsplit") == pytest.approx(0.25)
    assert wilcoxon_signed_rank([0.0, 0.0]) == 1.0 and wilcoxon_signed_rank([(0.5, 0.5)] * 3) == 1.0
    assert np.isnan(wilcoxon_signed_rank([]))
    assert wilcoxon_signed_rank([(0.0, 1.0), (0.0, 0.5), (0.2, 0.9)]) == pytest.approx(0.25)  # pairs
    with pytest.raises(ValueError, match="zero_method"):
        wilcoxon_signed_rank([1.0], zero_method="pratt")


def test_wilcoxon_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(11)
    for n in (5, 12, 30, 50):  # no ties: scipy's exact test
        d = rng.normal(0.3, 1, n)
        assert wilcoxon_signed_rank(d) == pytest.approx(stats.wilcoxon(d).pvalue, rel=1e-9)
    for n in (6, 13):  # ties and zeros, at most 13: scipy's permutation test over every sign pattern
        d = rng.integers(-3, 4, n) / 3
        assert wilcoxon_signed_rank(d) == pytest.approx(stats.wilcoxon(d).pvalue, rel=1e-9)
    for d in (rng.normal(0.1, 1, 80), rng.integers(-3, 4, 60) / 3):  # the normal approximation, tie-corrected
        assert wilcoxon_signed_rank(d, exact_max=0) == pytest.approx(
            stats.wilcoxon(d, method="asymptotic").pvalue, rel=1e-9)
        assert wilcoxon_signed_rank(d) == pytest.approx(wilcoxon_signed_rank(d, exact_max=0), abs=0.01)


# -- the report ------------------------------------------------------------------------------------------------------

WINS = {"standard": 2, "scene_graph": 8, "filler": 3, "wrong_graph": 1}  # seeds < WINS succeed, in each task
CLASSES = ["wrong_object", "missed_grasp", "timed_out"]


def synthetic(modes=tuple(WINS), policy="pi0", progress=True, failure_class=True, tasks=(0, 1)) -> list[dict]:
    records = []
    for task in tasks:
        for seed in range(10):
            for mode in modes:
                r = {"policy": policy, "task_id": task, "perturbation": "none", "mode": mode, "seed": seed,
                     "success": seed < WINS[mode]}
                if progress:
                    r["progress"] = 1.0 if r["success"] else round(seed % 3 / 3 + (mode == "scene_graph") / 4, 4)
                if failure_class:
                    r["failure_class"] = "" if r["success"] else CLASSES[(seed + task) % 3]
                records.append(r)
    return records


def test_controls_are_known_by_their_registered_class():
    assert is_control("filler") and is_control("wrong_graph") and is_control("shuffled_graph")
    assert not is_control("scene_graph") and not is_control("standard") and not is_control("bounding_boxes")
    assert not is_control("an_unregistered_mode")

    @dataclass
    class Blank(ContextMode):
        control: ClassVar[bool] = True

    ContextMode.register("blank_test_control")(Blank)
    try:
        assert is_control("blank_test_control")
        assert planned_comparisons(["blank_test_control", "scene_graph", "standard"]) == [
            ("scene_graph", "standard"), ("blank_test_control", "standard"), ("scene_graph", "blank_test_control")]
    finally:
        ContextMode.unregister("blank_test_control")
    assert planned_comparisons(["filler", "standard"]) == [("filler", "standard")]  # no sg: no sg vs control
    assert planned_comparisons(["filler", "scene_graph"]) == [("scene_graph", "filler")]  # no std
    assert planned_comparisons(["standard"]) == []


def test_comparisons_rows_with_holm_progress_and_failures(tmp_path):
    records = synthetic()
    comps = comparisons(records)
    expected = [("scene_graph", "standard"), ("filler", "standard"), ("wrong_graph", "standard"),
                ("scene_graph", "filler"), ("scene_graph", "wrong_graph")]
    assert [(c.treatment, c.reference) for c in comps] == expected
    raw = []
    for c, (t, r) in zip(comps, expected):
        # 20 pairs (2 tasks x 10 seeds); with nested successes only one side of the discordant pairs exists
        only_t, only_r = 2 * max(WINS[t] - WINS[r], 0), 2 * max(WINS[r] - WINS[t], 0)
        assert (c.pairs, c.mcnemar.only_treatment, c.mcnemar.only_baseline) == (20, only_t, only_r)
        assert c.mcnemar.p_value == pytest.approx(mcnemar_exact(only_r, only_t))
        assert c.p_holm >= c.mcnemar.p_value and c.family == 5
        raw.append(c.mcnemar.p_value)
        assert c.progress_pairs == 20 and c.progress_delta.low <= c.progress_delta.mean <= c.progress_delta.high
    assert [c.p_holm for c in comps] == pytest.approx(holm(raw))
    sg = comps[0]
    assert sg.treatment_successes == 16 and sg.reference_successes == 4
    assert sg.progress_delta.mean > 0 and sg.progress_delta.low > 0 and sg.wilcoxon_p < 0.05

    # The main table's pooled row shows the same Holm p beside the raw one; its CSV column carries it.
    rows = {(r["task_id"], r["mode"]): r for r in csv_rows(records)}
    for c in comps[:3]:
        assert rows[("all", c.treatment)]["mcnemar_p_holm"] == pytest.approx(c.p_holm, rel=1e-3)
        assert rows[("all", c.treatment)]["mcnemar_p_holm"] >= rows[("all", c.treatment)]["mcnemar_p"]
        assert rows[(0, c.treatment)]["mcnemar_p_holm"] == ""  # per-task rows: raw p only
    table = markdown_table(records)
    assert f"+60.0 (p={raw[0]:.2g}, Holm {comps[0].p_holm:.2g})" in table
    assert "### Paired comparisons, all tasks pooled" in table and "Holm-Bonferroni" in table
    assert f"| pi0 | {short('scene_graph')} vs {short('filler')} | 20 | 80.0 | 30.0 | +50.0 |" in table
    assert "| Wilcoxon p |" in table and "bootstrap" in table
    # Failure classes among failed episodes: standard fails seeds 2..9 of both tasks.
    assert "### Failure classes, all tasks pooled" in table
    assert f"| pi0 | {short('standard')} | 20 | 16 | 6 | 5 | 0 | 5 | 0 | 0 | 0 |" in table

    paths = write_report(tmp_path, records)
    assert {"markdown", "csv", "comparisons", "plot", "failures", "progress_plot"} <= set(paths)
    assert all(p.is_file() for p in paths.values()) and paths["progress_plot"].name == "progress.png"
    with paths["comparisons"].open() as f:
        written = list(csv.DictReader(f))
    assert list(written[0]) == COMPARISON_COLUMNS
    assert [(r["treatment"], r["reference"]) for r in written] == expected
    assert all(float(r["mcnemar_p_holm"]) >= float(r["mcnemar_p"]) for r in written)
    assert float(written[0]["progress_ci95_low"]) <= float(written[0]["progress_delta"])
    with paths["failures"].open() as f:
        failures = {r["mode"]: r for r in csv.DictReader(f)}
    assert (failures["scene_graph"]["failed"], failures["scene_graph"]["timed_out"]) == ("4", "1")
    assert "mcnemar_p_holm" in next(csv.reader(paths["csv"].open()))


def test_holm_family_is_per_policy_and_only_comparisons_present():
    records = synthetic() + synthetic(modes=("standard", "scene_graph"), policy="octo")
    comps = comparisons(records)
    octo = [c for c in comps if c.policy == "octo"]
    assert [(c.treatment, c.reference, c.family) for c in octo] == [("scene_graph", "standard", 1)]
    assert octo[0].p_holm == octo[0].mcnemar.p_value  # alone in its family
    assert {c.family for c in comps if c.policy == "pi0"} == {5}
    # A control without scene_graph in the records: compared with standard only.
    assert [(c.treatment, c.reference) for c in comparisons(synthetic(modes=("standard", "filler")))] == [
        ("filler", "standard")]


def test_old_records_without_progress_or_failure_class_still_report(tmp_path):
    records = synthetic(progress=False, failure_class=False)
    comps = comparisons(records)
    assert len(comps) == 5 and all(c.progress_pairs == 0 and c.progress_delta is None for c in comps)
    table = markdown_table(records)
    assert "### Paired comparisons" in table and "Wilcoxon" not in table and "Failure classes" not in table
    paths = write_report(tmp_path, records)
    assert "failures" not in paths and "progress_plot" not in paths and paths["comparisons"].is_file()
    with paths["comparisons"].open() as f:
        row = next(csv.DictReader(f))
    assert row["progress_delta"] == "" and row["wilcoxon_p"] == "" and row["progress_pairs"] == "0"


def test_progress_known_for_some_episodes_only():
    records = synthetic()
    for r in records:
        if r["task_id"] == 1:
            r["progress"] = None
        if not r["success"] and r["mode"] == "filler":
            r["failure_class"] = ""  # a failure recorded without its class
    comps = {(c.treatment, c.reference): c for c in comparisons(records)}
    assert comps[("scene_graph", "standard")].progress_pairs == 10
    table = markdown_table(records)
    assert "(n=10) |" in table and "not classified" in table
    # Only one mode: nothing to compare, and the report still has its main table.
    single = [r for r in records if r["mode"] == "standard"]
    assert comparisons(single) == [] and "Paired comparisons" not in markdown_table(single)


def test_plot_labels_are_distinct(tmp_path):
    assert _labels(["standard", "filler"]) == {"standard": short("standard"), "filler": short("filler")}
    assert len(set(_labels(["standard", "scene_graph", "filler", "wrong_graph", "shuffled_graph"]).values())) == 5
    paths = write_report(tmp_path, synthetic(modes=("standard", "scene_graph", "filler")))
    assert paths["plot"].stat().st_size > 0
