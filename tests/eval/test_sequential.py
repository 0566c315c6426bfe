"""The sequential McNemar test: its type-I error, exact (by dynamic programming, checked against enumerating
every outcome) and simulated (10,000 seeded runs per setting), its power against the fixed-sample test, its
verdicts, and the report's sequential columns in the order the pairs were run."""

import csv
import itertools
from fractions import Fraction

import numpy as np
import pytest

from sgvla.core.sequential import SPENDING, boundaries, sequential_mcnemar, simulate
from sgvla.core.stats import mcnemar_exact
from sgvla.eval.report import SequentialPlan, csv_rows, markdown_table, write_report

RUNS = 10_000


def patterns(planned: int) -> dict[str, np.ndarray]:
    """Which matched pairs were discordant: all, every third, and a seeded random third."""
    return {"all": np.ones(planned, bool), "every third": np.arange(planned) % 3 == 2,
            "random": np.random.default_rng(planned).random(planned) < 0.3}


@pytest.mark.parametrize("spending", list(SPENDING))
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1])
@pytest.mark.parametrize("planned", [10, 30, 50, 120])
def test_exact_type_one_error_is_within_alpha_for_every_pattern(planned, alpha, spending):
    allowed = SPENDING[spending](alpha)
    for name, discordant in patterns(planned).items():
        spent = boundaries(discordant, planned, alpha, spending).spent[0]
        assert all(isinstance(s, Fraction) for s in spent)
        assert spent[-1] <= alpha, (name, float(spent[-1]))  # exact: Fractions against the float alpha
        assert all(a <= b for a, b in itertools.pairwise(spent))
        for m, s in enumerate(spent[:-1], 1):
            assert s <= min(alpha, allowed(m / planned)), (name, m)  # never ahead of the spending function
    # Discreteness costs little once there are enough discordant pairs: nearly all of alpha is spent.
    if planned >= 50:
        assert boundaries(np.ones(planned, bool), planned, alpha, spending).spent[0, -1] > 0.8 * alpha


@pytest.mark.parametrize("spending", list(SPENDING))
@pytest.mark.parametrize("planned, discordant", [(14, np.ones(14, bool)), (18, np.arange(18) % 3 != 0)])
def test_spent_alpha_is_the_probability_of_a_decision_by_enumeration(planned, discordant, spending):
    """Every one of the 2^n directions of the discordant pairs, equally likely under H0: the share that decides
    by each pair is exactly the spent alpha, and the verdict function decides where the boundaries say."""
    bounds = boundaries(discordant, planned, 0.1, spending)
    n_disc = int(discordant.sum())
    directions = (np.arange(2**n_disc)[:, None] >> np.arange(n_disc)) & 1  # every outcome once
    favours = np.zeros((len(directions), planned), bool)
    favours[:, discordant] = directions.astype(bool)
    n, c = np.cumsum(discordant), np.cumsum(favours, axis=1)
    lower = bounds.lower[0]
    crossed = (c <= lower) | (c >= n - lower)
    decided_by = np.cumsum(crossed, axis=1) > 0
    for m in range(planned):
        assert Fraction(int(decided_by[:, m].sum()), 2**n_disc) == bounds.spent[0, m]
    for row in np.random.default_rng(0).choice(len(directions), 40, replace=False):
        pairs = [(bool(d and not f), bool(f)) for d, f in zip(discordant, favours[row])]
        verdict = sequential_mcnemar(pairs, planned, 0.1, spending)
        first = int(np.argmax(crossed[row])) + 1 if crossed[row].any() else None
        assert verdict.at_pair == first
        assert verdict.decision == ("inconclusive" if first is None else
                                    "treatment" if c[row, first - 1] >= n[first - 1] - lower[first - 1] else "baseline")


def test_the_simulation_computes_the_exact_boundaries():
    """The vectorised float walk of the simulation and the exact one take the same boundaries."""
    discordant = np.random.default_rng(1).random((200, 60)) < 0.4
    exact, fast = boundaries(discordant, 60, 0.05), boundaries(discordant, 60, 0.05, exact=False)
    assert np.array_equal(exact.lower, fast.lower)
    assert np.array_equal(exact.spent.astype(float), fast.spent)


@pytest.mark.parametrize("spending", list(SPENDING))
@pytest.mark.parametrize("planned, p_discordant", [(30, 0.3), (50, 0.3), (100, 0.3), (50, 0.8)])
def test_simulated_type_one_error_is_within_alpha(planned, p_discordant, spending):
    alpha = 0.05
    sim = simulate(planned, alpha, RUNS, p_discordant, 0.5, np.random.default_rng(planned), spending)
    rate = np.mean(sim.decision != 0)
    assert rate <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / RUNS), rate
    # Symmetric under H0: false decisions go either way.
    assert abs(np.mean(sim.decision == 1) - np.mean(sim.decision == -1)) < 4 * np.sqrt(alpha / RUNS)


def test_simulation_agrees_with_the_exact_error_when_every_pair_is_discordant():
    planned, alpha = 40, 0.05
    exact = float(boundaries(np.ones(planned, bool), planned, alpha).spent[0, -1])
    sim = simulate(planned, alpha, RUNS, 1.0, 0.5, np.random.default_rng(7))
    assert abs(np.mean(sim.decision != 0) - exact) < 4 * np.sqrt(exact * (1 - exact) / RUNS)


@pytest.mark.parametrize("p_treatment", [0.8, 0.9])
def test_power_matches_the_fixed_sample_test_and_stops_early(p_treatment):
    """Graph better in 80% / 90% of discordant pairs, a third of 50 pairs discordant: the sequential test loses
    no power to the fixed-sample McNemar test after all pairs, needs fewer pairs on average, and never decides
    for the worse mode."""
    planned = 50
    sim = simulate(planned, 0.05, RUNS, 0.3, p_treatment, np.random.default_rng(11))
    power, fixed = np.mean(sim.decision == 1), np.mean(sim.fixed == 1)
    assert power >= fixed - 3 * np.sqrt(fixed * (1 - fixed) / RUNS), (power, fixed)
    assert np.mean(sim.pairs_used) < planned - 1
    assert np.mean(sim.decision == -1) < 1e-3


def test_verdicts():
    win, loss, tie = (False, True), (True, False), (True, True)
    planned = 20
    sequence = [tie, win, tie, win, win, win, win, win, win, win, win, loss, loss, loss]
    verdicts = [sequential_mcnemar(sequence[:m], planned, 0.05) for m in range(len(sequence) + 1)]
    decided = [v for v in verdicts if v.decision == "treatment"]
    assert decided and all(v.decision == "undecided" for v in verdicts[:len(verdicts) - len(decided)])
    first = decided[0]
    assert first.at_pair == first.pairs and first.only_baseline == 0 and first.only_treatment == first.discordant
    assert first.only_treatment >= first.upper and 0 < first.alpha_spent <= 0.05
    for later in decided[1:]:  # a decision stands; only the descriptive fixed-sample p moves on
        assert (later.at_pair, later.only_treatment, later.upper) == (first.at_pair, first.only_treatment, first.upper)
    assert verdicts[-1].fixed_p == mcnemar_exact(3, 9)
    assert sequential_mcnemar([], planned, 0.05).decision == "undecided"
    assert sequential_mcnemar([loss] * 6 + [win] * 4, 10, 0.05).decision == "inconclusive"
    assert sequential_mcnemar([loss] * 12, 12, 0.05).decision == "baseline"
    for args, message in ((([win] * 3, 2, 0.05), "3 matched pairs, but the plan has 2"),
                          (([], 0, 0.05), "planned pairs must be an integer >= 1, got 0"),
                          (([], 5, 1.0), r"alpha must be within \(0, 1\), got 1.0")):
        with pytest.raises(ValueError, match=message):
            sequential_mcnemar(*args)
    with pytest.raises(ValueError, match=r"unknown spending function 'linear'; valid: \['obrien_fleming', "):
        sequential_mcnemar([], 5, 0.05, "linear")


def records_in_run_order(order: list[int], wins: set[int]) -> list[dict]:
    """Seeds `order` run one after another, each standard then scene_graph; the graph wins on seeds in `wins`."""
    return [{"policy": "p", "task_id": 0, "perturbation": "x", "mode": mode, "seed": seed,
             "success": mode == "scene_graph" and seed in wins}
            for seed in order for mode in ("standard", "scene_graph")]


def test_report_tests_the_pairs_in_the_order_they_were_run(tmp_path):
    plan = SequentialPlan(alpha=0.05, seeds=12, tasks=1)
    wins = set(range(4, 12))
    forward = records_in_run_order(list(range(12)), wins)
    backward = records_in_run_order(list(range(11, -1, -1)), wins)
    for records in (forward, backward):
        order = list(dict.fromkeys(r["seed"] for r in records))
        expected = sequential_mcnemar([(False, seed in wins) for seed in order], 12, 0.05)
        rows = {r["task_id"]: r for r in csv_rows(records, plan=plan) if r["mode"] == "scene_graph"}
        assert rows[0]["sequential"] == "scene_graph" and rows[0]["sequential_at_pair"] == expected.at_pair
        assert (rows[0]["planned_pairs"], rows[0]["alpha"]) == (12, 0.05)
        assert f"| sg better (pair {expected.at_pair}) |" in markdown_table(records, plan=plan)
    # Run forward the graph's wins come last (seeds 4..11), backward they come first: an earlier decision.
    at = {name: csv_rows(r, plan=plan)[0]["sequential_at_pair"] for name, r in (("fwd", forward), ("bwd", backward))}
    assert at["bwd"] < at["fwd"]
    # A pair counts from its later episode: every standard episode first (seeds forward), then the scene_graph
    # ones backward, is the backward order of pairs.
    std_first = [r for r in forward if r["mode"] == "standard"] + [r for r in backward if r["mode"] == "scene_graph"]
    assert csv_rows(std_first, plan=plan)[0]["sequential_at_pair"] == at["bwd"]
    # Part of the plan run: undecided, with how far it is.
    assert "| undecided (3/12) |" in markdown_table(forward[:6], plan=plan)
    # Without the plan there is no verdict, and the note says why.
    assert "no plan (config.yaml) with these records" in markdown_table(forward)
    paths = write_report(tmp_path, forward, plan=plan)
    header = next(csv.reader(paths["csv"].open()))
    assert header[-5:] == ["sequential", "sequential_at_pair", "planned_pairs", "alpha", "infra_failed"]


def test_the_plan_stored_with_the_records(tmp_path):
    assert SequentialPlan.stored(tmp_path) is None
    (tmp_path / "config.yaml").write_text("episodes: 5\ntasks: [0, 3, 7]\nalpha: 0.1\n")
    plan = SequentialPlan.stored(tmp_path)
    assert plan == SequentialPlan(0.1, 5, 3) and (plan.planned(False), plan.planned(True)) == (5, 15)
    (tmp_path / "config.yaml").write_text("episodes: 5\ntasks: [0]\n")  # stored before alpha existed
    assert SequentialPlan.stored(tmp_path).alpha == 0.05
    (tmp_path / "config.yaml").write_text("episodes: 5\ntasks: [0]\nalpha: 2\n")
    with pytest.raises(ValueError, match=r"config.yaml: alpha must be within \(0, 1\)"):
        SequentialPlan.stored(tmp_path)
