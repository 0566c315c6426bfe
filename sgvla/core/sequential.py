"""An exact group-sequential McNemar test: is baseline-vs-treatment decided yet, after every matched pair?

Why: on the physical arm an episode costs minutes of an operator's time, so a run should stop as soon as
the standard-vs-graph difference is decided. Looking at the fixed-sample McNemar p after every pair and
stopping at the first p <= alpha inflates the type-I error far above alpha (every look is another chance
of a false "decided"). This test spends alpha across the looks instead, so stopping at its first decision
keeps the probability of a false decision at most alpha, exactly.

Design. Only discordant pairs (one mode succeeded, the other failed) carry information on the difference.
Under H0 (no difference; McNemar's null) a discordant pair favours the treatment with probability 1/2,
independently of the others and of which pairs were discordant, so the number c favouring the treatment
after n discordant pairs is a symmetric random walk. There is a look after every discordant pair, and a last
one after the plan's last matched pair. Alpha is spent over calendar time t = m / M (m: matched pairs run,
M: matched pairs the plan holds) with a Lan-DeMets spending function, the cumulative alpha allowed by t:

    O'Brien-Fleming-like (default): alpha(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))
    Pocock-like:                    alpha(t) = alpha ln(1 + (e - 1) t)

O'Brien-Fleming spends almost nothing early (an early decision needs a lopsided record) and keeps nearly the
fixed-sample test's power at the end; Pocock decides earlier on large effects and loses more power at the
end. Calendar time, not the discordant count n, measures information because how many pairs will be
discordant is unknown in advance: spending over n / M, when a third of the pairs are discordant, would end
at t = 1/3, where O'Brien-Fleming allows 0.0007 of an alpha of 0.05 (a test with almost no power).
benchmarks/bench_sequential.py measures type-I error and power against the fixed-sample test.

The boundaries are symmetric: at a look, decide for the baseline when c <= lower and for the treatment when
c >= n - lower. They depend only on when the looks came (which pairs were discordant), never on their
outcomes, and are computed exactly by dynamic programming over the walk: the probability mass of the paths
that crossed no earlier boundary, per c, in integers (units of 2^-M), so the probability under H0 of a
decision by each look is an exact fraction; lower is the largest value that keeps it within alpha(t). The walk
is discrete, so a look may spend less than allowed; the rest carries over. Given any pattern of discordant
pairs the probability under H0 of ever deciding is therefore at most alpha(1) = alpha, so it is at most alpha
unconditionally too. A run stopped undecided before its plan ends spends less: still valid. M must be fixed
before the first pair (a run folder refuses a changed plan): the boundaries of earlier looks depend on it.

A decision stands once made (the operator stops there); later pairs change only the descriptive fixed-sample
McNemar p over all pairs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import Literal

import numpy as np

from sgvla.core.stats import mcnemar_exact


def _obrien_fleming(alpha: float) -> Callable[[float], float]:
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return lambda t: 2 * (1 - NormalDist().cdf(z / math.sqrt(t)))


def _pocock(alpha: float) -> Callable[[float], float]:
    return lambda t: alpha * math.log(1 + (math.e - 1) * t)


SPENDING = {"obrien_fleming": _obrien_fleming, "pocock": _pocock}
Spending = Literal["obrien_fleming", "pocock"]


def _check(planned: int, alpha: float, spending: str) -> None:
    if isinstance(planned, bool) or not isinstance(planned, int) or planned < 1:
        raise ValueError(f"planned pairs must be an integer >= 1, got {planned!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be within (0, 1), got {alpha}")
    if spending not in SPENDING:
        raise ValueError(f"unknown spending function {spending!r}; valid: {list(SPENDING)}")


@dataclass(frozen=True)
class Boundaries:
    """Per run and matched pair: `lower` (decide for the baseline when c <= lower, for the treatment when
    c >= n - lower; -1: no decision there, no look or nothing to spend) and `spent`, the probability under H0
    of a decision by then (exact fractions when computed exactly, else floats), for the run's discordant pattern."""

    lower: np.ndarray  # (runs, pairs) int
    spent: np.ndarray  # (runs, pairs)


def boundaries(discordant: np.ndarray, planned: int, alpha: float, spending: Spending = "obrien_fleming",
               exact: bool = True) -> Boundaries:
    """The boundaries of each run (a row of `discordant`, which of its matched pairs so far were discordant) of
    a plan of `planned` matched pairs. Exact: Python integers; else float64, vectorised over runs (exact too
    while a run has at most 53 discordant pairs: every mass is then a multiple of 2^-53)."""
    _check(planned, alpha, spending)
    discordant = np.atleast_2d(np.asarray(discordant, dtype=bool))
    runs, pairs = discordant.shape
    if pairs > planned:
        raise ValueError(f"{pairs} matched pairs, but the plan has {planned}")
    allowed = SPENDING[spending](alpha)
    unit = 2**planned if exact else 1.0  # a path of n discordant pairs weighs unit / 2^n
    halve = np.floor_divide if exact else np.true_divide
    width = int(discordant.sum(axis=1).max(initial=0)) + 1
    mass = np.zeros((runs, width), dtype=object if exact else float)
    mass[:, 0] = unit
    spent = mass[:, 0] * 0
    n = np.zeros(runs, dtype=int)
    lower = np.full((runs, pairs), -1, dtype=int)
    spent_at = np.empty((runs, pairs), dtype=mass.dtype)
    for i in range(pairs):
        step = discordant[:, i]
        if step.any():
            k = int(n[step].max()) + 2  # columns that can hold mass after this step
            grown = mass[step, :k]
            grown[:, 1:] = grown[:, 1:] + grown[:, :-1]
            mass[step, :k] = halve(grown, 2)
            n += step
        final = i + 1 == planned
        rows = np.arange(runs) if final else np.flatnonzero(step)
        budget = alpha if final else min(alpha, allowed((i + 1) / planned))
        half = (int(n[rows].max(initial=0)) + 1) // 2  # lower < n - lower
        if half and len(rows):
            cum = np.cumsum(mass[rows, :half], axis=1)
            limit = Fraction(budget) * unit if exact else budget
            cols = np.arange(half)
            ok = (spent[rows, None] + 2 * cum <= limit) & (cols < n[rows, None] - cols)
            low = ok.sum(axis=1) - 1
            spends = low >= 0
            spent[rows[spends]] += 2 * cum[spends, low[spends]]
            lower[rows, i] = low
            span = np.arange(mass.shape[1])
            cut = (span <= low[:, None]) | (span >= (n[rows] - low)[:, None])
            mass[rows] = np.where(cut, mass[rows] * 0, mass[rows])
        spent_at[:, i] = spent
    if exact:
        spent_at = np.vectorize(lambda s: Fraction(s, unit), otypes=[object])(spent_at)
    return Boundaries(lower, spent_at)


Decision = Literal["treatment", "baseline", "undecided", "inconclusive"]


@dataclass(frozen=True)
class SequentialResult:
    """The verdict after the matched pairs so far, in the order they were run.

    decision: treatment or baseline better (decided: stop), undecided (go on), or inconclusive (every planned
    pair was run and no boundary was crossed). at_pair: the matched pair (1-based) whose result decided it; the
    counts, boundaries and spent alpha are those of that look, or of the last look when not decided.
    fixed_p: the exact McNemar p over all pairs so far (descriptive once decided)."""

    decision: Decision
    pairs: int
    planned: int
    alpha: float
    at_pair: int | None
    only_baseline: int
    only_treatment: int
    lower: int  # -1: no decision possible at that pair
    upper: int
    alpha_spent: Fraction
    fixed_p: float

    @property
    def discordant(self) -> int:
        return self.only_baseline + self.only_treatment


def _walk(pairs: np.ndarray, favours: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, c) after each matched pair: discordant pairs and those favouring the treatment."""
    return np.cumsum(pairs, axis=1), np.cumsum(favours, axis=1)


def _first_crossing(lower: np.ndarray, n: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per run: the index of the first matched pair where c crossed a boundary (0 when none) and +1 (treatment),
    -1 (baseline) or 0 (none)."""
    up, down = c >= n - lower, c <= lower
    crossed = up | down
    first = np.argmax(crossed, axis=1)
    rows = np.arange(len(first))
    hit = crossed[rows, first]
    return first, np.where(hit, np.where(up[rows, first], 1, -1), 0)


def sequential_mcnemar(pairs: Sequence[tuple[bool, bool]], planned: int, alpha: float,
                       spending: Spending = "obrien_fleming") -> SequentialResult:
    """The verdict after `pairs`, (baseline success, treatment success) per matched pair in the order run, of a
    plan of `planned` matched pairs tested at two-sided `alpha`."""
    _check(planned, alpha, spending)
    outcome = np.array(pairs, dtype=bool).reshape(-1, 2)
    if len(outcome) > planned:
        raise ValueError(f"{len(outcome)} matched pairs, but the plan has {planned}")
    discordant = (outcome[:, 0] != outcome[:, 1])[None]  # one run
    favours = discordant & outcome[None, :, 1]
    fixed_p = mcnemar_exact(int(np.sum(discordant & outcome[None, :, 0])), int(favours.sum()))
    if not len(outcome):
        return SequentialResult("undecided", 0, planned, alpha, None, 0, 0, -1, 1, Fraction(0), fixed_p)
    bounds = boundaries(discordant, planned, alpha, spending)
    n, c = _walk(discordant, favours)
    first, sign = _first_crossing(bounds.lower, n, c)
    looks = np.flatnonzero(discordant[0] | (np.arange(len(outcome)) + 1 == planned))
    i = int(first[0]) if sign[0] else int(looks[-1]) if len(looks) else len(outcome) - 1
    decision = {1: "treatment", -1: "baseline"}.get(int(sign[0]),
                                                     "inconclusive" if len(outcome) == planned else "undecided")
    low = int(bounds.lower[0, i])
    return SequentialResult(decision, len(outcome), planned, alpha, i + 1 if sign[0] else None,
                            int(n[0, i] - c[0, i]), int(c[0, i]), low, int(n[0, i]) - low, bounds.spent[0, i],
                            fixed_p)


@dataclass(frozen=True)
class Simulated:
    """Simulated runs of a plan: per run the decision (+1 treatment, -1 baseline, 0 none), the matched pairs it
    took (the plan's size when undecided), and the fixed-sample McNemar decision after all pairs (same coding)."""

    decision: np.ndarray
    pairs_used: np.ndarray
    fixed: np.ndarray


def simulate(planned: int, alpha: float, runs: int, p_discordant: float, p_treatment: float,
             rng: np.random.Generator, spending: Spending = "obrien_fleming") -> Simulated:
    """`runs` runs of `planned` matched pairs, each discordant with probability `p_discordant` and then favouring
    the treatment with probability `p_treatment` (1/2: H0), vectorised; measures the error rates."""
    size = (runs, planned)
    discordant = rng.random(size) < p_discordant
    favours = discordant & (rng.random(size) < p_treatment)
    bounds = boundaries(discordant, planned, alpha, spending, exact=False)
    n, c = _walk(discordant, favours)
    first, decision = _first_crossing(bounds.lower, n, c)
    final = np.stack([n[:, -1] - c[:, -1], c[:, -1]], axis=1)  # (b, c) over all pairs
    uniq, inverse = np.unique(final, axis=0, return_inverse=True)
    p = np.array([mcnemar_exact(int(b), int(k)) for b, k in uniq])[inverse.ravel()]
    fixed = np.where(p <= alpha, np.sign(final[:, 1] - final[:, 0]), 0)
    return Simulated(decision, np.where(decision != 0, first + 1, planned), fixed)
