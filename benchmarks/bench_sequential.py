"""Error rates of the sequential McNemar test (sgvla.core.sequential), side by side with the fixed-sample test.

Seeded simulations of whole runs: `planned` matched pairs, each discordant with probability --p-discordant, a
discordant pair favouring the graph with probability p (0.5: no difference, H0). Per setting, the rate of
deciding for the graph (type-I error under H0, else power) and the mean matched pairs run before stopping, for:

- seq OBF / seq Pocock: the sequential test with O'Brien-Fleming-like / Pocock-like alpha spending, stopping
  at its first decision;
- fixed: the exact McNemar test once, after all planned pairs;
- naive: the fixed-sample McNemar p after every pair, stopping at the first p <= alpha (what the sequential
  test replaces: its type-I error is well above alpha).

"exact I" is the type-I error of the sequential design computed exactly (dynamic programming) when every pair
is discordant; under H0 a rate counts decisions either way.

    .venv/bin/python benchmarks/bench_sequential.py [--runs 20000] [--planned 30 50 150] [--p-discordant 0.3]
"""

import argparse
import time

import numpy as np

from sgvla.core.sequential import boundaries, simulate
from sgvla.core.stats import mcnemar_exact


def naive(planned: int, alpha: float, runs: int, p_discordant: float, p_treatment: float,
          rng: np.random.Generator) -> tuple[float, float]:
    """(rate of deciding for the treatment, under H0 either way; mean pairs run) when the fixed-sample p is
    read after every pair."""
    reject = np.zeros((planned + 1, planned + 1), bool)  # [n, c]
    for n in range(1, planned + 1):
        for c in range(n + 1):
            reject[n, c] = mcnemar_exact(n - c, c) <= alpha
    discordant = rng.random((runs, planned)) < p_discordant
    favours = discordant & (rng.random((runs, planned)) < p_treatment)
    n, c = np.cumsum(discordant, axis=1), np.cumsum(favours, axis=1)
    hit = reject[n, c]
    first = np.argmax(hit, axis=1)
    decided = hit[np.arange(runs), first]
    towards = c[np.arange(runs), first] * 2 > n[np.arange(runs), first]
    rate = np.mean(decided) if p_treatment == 0.5 else np.mean(decided & towards)
    return float(rate), float(np.mean(np.where(decided, first + 1, planned)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--planned", type=int, nargs="+", default=[30, 50, 150])
    parser.add_argument("--p-discordant", type=float, default=0.3)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.runs < 10_000:
        parser.error("--runs must be >= 10000")
    alpha, runs = args.alpha, args.runs
    se = np.sqrt(alpha * (1 - alpha) / runs)
    print(f"{runs} simulated runs per row, alpha={alpha}, {args.p_discordant:.0%} of pairs discordant; "
          f"type-I bound alpha + 3 SE = {alpha + 3 * se:.4f}")
    print(f"{'pairs':>5} {'p':>4} | {'seq OBF':>8} {'pairs':>6} | {'seq Pocock':>10} {'pairs':>6} | "
          f"{'fixed':>6} | {'naive':>6} {'pairs':>6} | {'exact I OBF':>11} {'exact I Poc':>11}")
    start = time.perf_counter()
    for planned in args.planned:
        exact = {s: float(boundaries(np.ones(planned, bool), planned, alpha, s).spent[0, -1])
                 for s in ("obrien_fleming", "pocock")}
        for p in (0.5, 0.7, 0.8, 0.9):
            row = {}
            for spending in ("obrien_fleming", "pocock"):
                sim = simulate(planned, alpha, runs, args.p_discordant, p, np.random.default_rng(args.seed),
                               spending)
                rate = np.mean(sim.decision != 0) if p == 0.5 else np.mean(sim.decision == 1)
                row[spending] = (rate, np.mean(sim.pairs_used))
                fixed = np.mean(sim.fixed != 0) if p == 0.5 else np.mean(sim.fixed == 1)
            nv, nv_pairs = naive(planned, alpha, runs, args.p_discordant, p, np.random.default_rng(args.seed))
            (obf, obf_pairs), (poc, poc_pairs) = row["obrien_fleming"], row["pocock"]
            print(f"{planned:>5} {p:>4} | {obf:>8.4f} {obf_pairs:>6.1f} | {poc:>10.4f} {poc_pairs:>6.1f} | "
                  f"{fixed:>6.4f} | {nv:>6.4f} {nv_pairs:>6.1f} | "
                  + (f"{exact['obrien_fleming']:>11.4f} {exact['pocock']:>11.4f}" if p == 0.5 else ""))
    print(f"p: share of discordant pairs favouring the graph (0.5: H0, rates are type-I errors, else power); "
          f"pairs: mean matched pairs run before stopping (all planned when undecided). "
          f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
