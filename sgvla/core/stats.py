"""Statistics for success rates of matched evaluation episodes.

Success is binary and episodes are few (tens per cell), so intervals are Wilson score intervals
(well behaved at 0% and 100%, unlike the normal approximation), and paired std-vs-sg differences
use the exact McNemar test on the discordant pairs of matched episodes (same task, perturbation and
seed under both modes).
"""

import math
from dataclasses import dataclass

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
