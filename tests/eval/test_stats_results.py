"""Wilson intervals, exact McNemar, and the resumable JSONL results file."""

import json

import pytest
from scipy.stats import binomtest

from sgvla.core.episode import EpisodeKey
from sgvla.eval.results import ResultsFile
from sgvla.core.stats import mcnemar_exact, paired_test, wilson


@pytest.mark.parametrize("k, n", [(23, 50), (1, 50), (7, 10), (3, 3)])
def test_wilson_matches_scipy(k, n):
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    r = wilson(k, n)
    assert r.low == pytest.approx(ref.low, abs=1e-9) and r.high == pytest.approx(ref.high, abs=1e-9)


def test_wilson_edges():
    assert wilson(0, 50).low == 0.0 and wilson(50, 50).high == 1.0
    assert wilson(0, 0).n == 0
    with pytest.raises(ValueError):
        wilson(3, 2)


@pytest.mark.parametrize("b, c", [(0, 5), (2, 8), (7, 7), (1, 12)])
def test_mcnemar_matches_binomial_test(b, c):
    assert mcnemar_exact(b, c) == pytest.approx(binomtest(c, b + c, 0.5).pvalue)


def test_mcnemar_exact():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 5) == pytest.approx(2 * 0.5**5)
    assert mcnemar_exact(2, 8) == pytest.approx(2 * (1 + 10 + 45) / 1024)
    t = paired_test([(False, True)] * 8 + [(True, False)] * 2 + [(True, True)] * 40)
    assert (t.n_pairs, t.only_baseline, t.only_treatment) == (50, 2, 8)
    assert t.delta == pytest.approx(6 / 50)


def record(seed, success=True):
    return {"policy": "p", "task_id": 1, "perturbation": "none", "mode": "standard", "seed": seed,
            "success": success}


def test_results_resume_and_repair(tmp_path):
    path = tmp_path / "episodes.jsonl"
    results = ResultsFile(path)
    results.append(record(0))
    results.append(record(1, False))
    with pytest.raises(ValueError, match="already recorded"):
        results.append(record(1))
    with path.open("a") as f:  # a crash in the middle of writing the third record
        f.write(json.dumps(record(2))[:20])
    reopened = ResultsFile(path)
    assert reopened.keys == {EpisodeKey("p", 1, "none", "standard", 0), EpisodeKey("p", 1, "none", "standard", 1)}
    reopened.append(record(2))
    assert [r["seed"] for r in ResultsFile(path).records()] == [0, 1, 2]


def test_results_keep_a_complete_last_record_and_refuse_duplicates(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(record(0)) + "\n" + json.dumps(record(1)))  # the newline was not written yet
    assert [r["seed"] for r in ResultsFile(path, writable=False).records()] == [0, 1]
    assert not path.read_text().endswith("\n")  # read-only: unchanged
    assert len(ResultsFile(path).keys) == 2 and path.read_text().endswith("\n")
    path.write_text(path.read_text() + json.dumps(record(1)) + "\n")  # two runs at once wrote this before locks
    with pytest.raises(ValueError, match=r"episode \('p', 1, 'none', 'standard', 1\) is recorded twice"):
        ResultsFile(path)


def test_results_corrupt_line_names_the_file(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text("not json\n")
    with pytest.raises(ValueError, match="episodes.jsonl:1"):
        ResultsFile(path)


def test_report_pairs_by_seed_and_pools_tasks():
    from sgvla.eval.report import SequentialPlan, csv_rows, markdown_table

    records = [{"policy": "p", "task_id": t, "perturbation": "x", "mode": m, "seed": s,
                "success": m == "scene_graph" or (t == 1 and s == 0)}
               for t in (0, 1) for s in (0, 1, 2) for m in ("standard", "scene_graph")]
    rows = {(r["task_id"], r["mode"]): r for r in csv_rows(records)}
    assert (rows[("all", "standard")]["successes"], rows[("all", "standard")]["episodes"]) == (1, 6)
    assert (rows[("all", "scene_graph")]["successes"], rows[("all", "scene_graph")]["episodes"]) == (6, 6)
    assert rows[("all", "scene_graph")]["delta_pp"] == pytest.approx(100 * 5 / 6, abs=0.01)
    assert rows[("all", "scene_graph")]["mcnemar_p"] == pytest.approx(2 * 0.5**5, abs=1e-4)
    # The pooled row gives the Holm-adjusted p beside the raw one (one comparison: the same); task rows keep raw p.
    assert "| all | all | 16.7 (1/6) | 100.0 (6/6) | +83.3 (p=0.062, Holm 0.062) |" in markdown_table(records)
    assert "| 1 | x | 33.3 (1/3) | 100.0 (3/3) | +66.7 (p=0.5) |" in markdown_table(records)
    assert rows[("all", "scene_graph")]["mcnemar_p_holm"] == rows[("all", "scene_graph")]["mcnemar_p"]
    assert rows[(1, "scene_graph")]["mcnemar_p_holm"] == "" and rows[("all", "standard")]["mcnemar_p_holm"] == ""
    # 5 of 6 pairs for the graph is not significant at 0.05 even after all of them (McNemar p = 0.062)
    plan = SequentialPlan(alpha=0.05, seeds=3, tasks=2)
    assert "| +83.3 (p=0.062, Holm 0.062) | inconclusive |" in markdown_table(records, plan=plan)
    assert {r["sequential"] for r in csv_rows(records, plan=plan) if r["mode"] == "scene_graph"} == {"inconclusive"}


def test_the_report_asks_to_check_episodes_a_verdict_stopped_at_once():
    from sgvla.eval.report import markdown_table

    records = [{"policy": "hold", "task_id": 0, "perturbation": "none", "mode": "standard", "seed": s, "success": True,
                "early_verdict": s == 1} for s in range(3)]
    table = markdown_table(records)
    assert ("Check: 1 episode(s) were stopped by a verdict within their first second (task 0 seed 1 std; "
            "`early_verdict` in episodes.jsonl)") in table
    assert "Check:" not in markdown_table(records[:1])
