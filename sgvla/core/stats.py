"""Statistics for success rates and progress scores of matched evaluation episodes.

Success is binary and episodes are few (tens per cell), so intervals are Wilson score intervals
(well behaved at 0% and 100%, unlike the normal approximation), and paired std-vs-sg differences
use the exact McNemar test on the discordant pairs of matched episodes (same task, perturbation and
seed under both modes). Several comparisons in one table are corrected together with Holm-Bonferroni
(`holm`). Progress scores (in [0, 1]) of matched episodes are compared by their mean paired difference
with a seeded percentile bootstrap interval (`paired_bootstrap`) and the Wilcoxon signed-rank test
(`wilcoxon_signed_rank`, exact on the signs for up to a few hundred pairs, so ties are no problem).

Everything here is numpy and the standard library: the report gives the same numbers where scipy is not
installed (the tests check these functions against scipy).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Rate:
    successes: int
    n: int
    low: float
    high: float

    @property
    def value(self) -> float:
        return self.successes / self.n if self.n else float("nan")


def wilson(successes: int, n: int, z: float = Z95) -> Rate:
    """Wilson score interval for a binomial proportion; (nan, nan) bounds when n == 0."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be within 0..n, got {successes} of {n}")
    if n == 0:
        return Rate(0, 0, float("nan"), float("nan"))
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return Rate(successes, n, low, high)


@dataclass(frozen=True)
class PairedTest:
    """Matched pairs of (baseline, treatment) outcomes.

    only_baseline: pairs where only the baseline succeeded (b); only_treatment: only the treatment (c).
    p_value: exact two-sided McNemar test, i.e. a binomial test of c against b + c at 1/2.
    """

    n_pairs: int
    only_baseline: int
    only_treatment: int
    delta: float  # treatment rate minus baseline rate over the pairs
    p_value: float


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts b and c."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def paired_test(pairs: list[tuple[bool, bool]]) -> PairedTest:
    b = sum(1 for base, treat in pairs if base and not treat)
    c = sum(1 for base, treat in pairs if treat and not base)
    n = len(pairs)
    delta = (c - b) / n if n else float("nan")
    return PairedTest(n, b, c, delta, mcnemar_exact(b, c))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni step-down adjusted p-values, in the order given.

    With the m raw p-values sorted ascending, p_(1) <= ... <= p_(m), the adjusted p_(i) is
    max over j <= i of min(1, (m - j + 1) p_(j)): never below the raw p, monotone in the raw order, at most 1.
    Rejecting where the adjusted p <= alpha keeps the family-wise error rate at alpha under any dependence
    between the tests. E.g. [0.01, 0.04, 0.03, 0.005] -> [0.03, 0.06, 0.06, 0.02]."""
    ps = [float(p) for p in p_values]
    bad = [p for p in ps if not 0.0 <= p <= 1.0]
    if bad:
        raise ValueError(f"p-values must be within [0, 1], got {bad}")
    m = len(ps)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=ps.__getitem__)):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adjusted[i] = running
    return adjusted


class Bootstrap(NamedTuple):
    """A mean with its bootstrap interval (unpacks as (mean, low, high))."""

    mean: float
    low: float
    high: float


def _differences(data) -> np.ndarray:
    """1-D float differences from differences, or from (reference, treatment) pairs (treatment - reference)."""
    arr = np.asarray(data, dtype=float)
    if arr.ndim == 2 and arr.shape[1] == 2:
        arr = arr[:, 1] - arr[:, 0]
    elif arr.size == 0:
        arr = arr.reshape(0)
    elif arr.ndim != 1:
        raise ValueError(f"expected differences or (reference, treatment) pairs, got an array of shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("differences must be finite numbers")
    return arr


def paired_bootstrap(data, n: int = 10_000, seed: int = 0, confidence: float = 0.95) -> Bootstrap:
    """The mean paired difference with its percentile bootstrap interval.

    `data`: the differences (treatment - reference) of matched pairs, or the (reference, treatment) pairs.
    The pairs are resampled with replacement `n` times (numpy's default generator seeded with `seed`, so the
    same data, n and seed give the same interval); the interval is the (1 - confidence)/2 and (1 + confidence)/2
    quantiles of the resampled means. Resampling whole pairs keeps the pairing. Plain values instead of
    differences give the bootstrap interval of their mean. No data: nan for all three."""
    d = _differences(data)
    if not 0 < confidence < 1 or n < 1:
        raise ValueError(f"confidence must be within (0, 1) and n >= 1, got {confidence} and {n}")
    if d.size == 0:
        return Bootstrap(float("nan"), float("nan"), float("nan"))
    mean = float(d.mean())
    if np.all(d == d[0]):  # no spread: every resample has the same mean
        return Bootstrap(mean, mean, mean)
    rng = np.random.default_rng(seed)
    means = np.empty(n)
    chunk = max(1, 2_000_000 // d.size)  # resamples drawn at once, to bound memory
    for start in range(0, n, chunk):
        rows = min(chunk, n - start)
        means[start:start + rows] = d[rng.integers(0, d.size, size=(rows, d.size))].mean(axis=1)
    low, high = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])
    return Bootstrap(mean, float(low), float(high))


WILCOXON_EXACT_MAX = 400  # nonzero differences up to which the signed-rank test is exact (beyond: normal)


def wilcoxon_signed_rank(data, zero_method: str = "wilcox", exact_max: int = WILCOXON_EXACT_MAX) -> float:
    """Two-sided p of the Wilcoxon signed-rank test that paired differences are symmetric about 0.

    `data`: differences, or (reference, treatment) pairs. The absolute differences are ranked (ties share their
    mean rank); T+ is the sum of the ranks of the positive differences. Under H0 each nonzero difference is
    positive or negative with probability 1/2 independently, given the ranks; the p-value is
    min(1, 2 min(P(T+ <= t), P(T+ >= t))) under that distribution, computed exactly (by dynamic programming
    over the 2^n sign patterns, ties included) for up to `exact_max` nonzero differences, else with the normal
    approximation of the same distribution (mean sum(r)/2, variance sum(r^2)/4, which is the usual tie
    correction; no continuity correction). Without ties it is scipy's exact test, beyond `exact_max` scipy's
    asymptotic one (correction=False); with ties and at most 13 differences, scipy's permutation test.

    Zero differences (`zero_method`): "wilcox" (default) drops them before ranking (Wilcoxon's rule);
    "zsplit" ranks them with the others and counts half of their ranks on each side. No nonzero difference
    (all zero): p = 1. No data: nan."""
    if zero_method not in ("wilcox", "zsplit"):
        raise ValueError(f"zero_method must be 'wilcox' or 'zsplit', got {zero_method!r}")
    d = _differences(data)
    if d.size == 0:
        return float("nan")
    if zero_method == "wilcox":
        d = d[d != 0]
    nonzero = d != 0
    if not nonzero.any():
        return 1.0
    ranks2 = _doubled_midranks(np.abs(d))  # twice the mean ranks: integers
    r = ranks2[nonzero]
    # 2 T+ less what zeros add whatever the signs (zsplit: half their ranks), in units of half a rank
    k = int(ranks2[d > 0].sum())
    if r.size <= exact_max:
        dist = np.zeros(int(r.sum()) + 1)
        dist[0] = 1.0
        top = 0
        for ri in r.astype(int):  # the distribution of the sum over the random signs, in units of 1/2 rank
            new = dist[:top + ri + 1] * 0.5
            new[ri:] += dist[:top + 1] * 0.5
            dist[:top + ri + 1] = new
            top += ri
        p = 2 * min(dist[:k + 1].sum(), dist[k:].sum())
    else:
        mean, sd = r.sum() / 2, math.sqrt((r.astype(float) ** 2).sum() / 4)
        p = math.erfc(abs(k - mean) / sd / math.sqrt(2))
    return float(min(1.0, p))


def _doubled_midranks(x: np.ndarray) -> np.ndarray:
    """2 x the average ranks (1-based) of x, as integers: tied values share the mean of their ranks."""
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    ranks2 = np.empty(x.size, dtype=np.int64)
    start = 0
    while start < x.size:
        end = start
        while end + 1 < x.size and sorted_x[end + 1] == sorted_x[start]:
            end += 1
        ranks2[order[start:end + 1]] = (start + 1) + (end + 1)  # twice the mean of ranks start+1 .. end+1
        start = end + 1
    return ranks2
