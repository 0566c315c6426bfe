"""Tables and plots of an evaluation, regenerated from its JSONL records alone.

The main table follows the layout of the paper's Table 8: one row per (task, perturbation), and
per policy the success of the baseline mode (`standard`), of each other mode, and the paired
difference in percentage points with its exact McNemar p-value over matched seeds, and the verdict of
the exact sequential McNemar test (`sgvla.core.sequential`) at the plan's alpha over the matched pairs in
the order they were run (the order of `episodes.jsonl`): decided, and at which pair, or not yet. It is what
an operator reading the report during the run would have seen, so a run (on the physical arm, where every
episode costs time) may stop at a decision without inflating the type-I error. Each row and each mode is
tested on its own at alpha, as the McNemar column is (no correction across rows).

Episodes whose infrastructure failed and that have no result yet (`infra_failures.jsonl`) are no
results: they are counted apart (a note under the table, `infra_failed` in the CSV), never as
policy failures.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sgvla.core.context import ContextMode
from sgvla.core.sequential import SequentialResult, sequential_mcnemar
from sgvla.core.stats import Rate, paired_test, wilson

# The registered context modes say which one is the baseline and how each is labelled (ContextMode.baseline, .label).
BASELINE = next(name for name, mode in ContextMode.choices().items() if mode.baseline)


def short(mode: str) -> str:
    """A mode's label in report columns and plots: its registered `label`, else its name."""
    registered = ContextMode.choices().get(mode)
    return (registered.label if registered is not None else "") or mode


@dataclass(frozen=True)
class SequentialPlan:
    """What the sequential verdict takes from the evaluation plan, fixed before its first episode: alpha, and
    how many matched pairs a row can hold (the seeds of a cell; times the tasks in the pooled row)."""

    alpha: float
    seeds: int
    tasks: int

    def planned(self, overall: bool) -> int:
        return self.seeds * (self.tasks if overall else 1)

    @classmethod
    def of(cls, settings: Mapping, where: str = "the plan") -> SequentialPlan:
        """From a plan's settings as `config.yaml` stores them; a plan written before `alpha` existed has the
        default."""
        from sgvla.eval.config import EvalConfig

        try:
            plan = cls(float(settings.get("alpha", EvalConfig.alpha)), int(settings["episodes"]),
                       len(settings["tasks"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: no valid alpha, episodes and tasks for the sequential test ({e!r})") from None
        if not 0 < plan.alpha < 1 or plan.seeds < 1 or plan.tasks < 1:
            raise ValueError(f"{where}: alpha must be within (0, 1) and episodes and tasks >= 1, got {plan}")
        return plan

    @classmethod
    def stored(cls, run_dir: Path) -> SequentialPlan | None:
        """The plan stored with a run's records (None when the folder has none)."""
        import yaml

        from sgvla.eval.run_dir import PLAN

        path = Path(run_dir) / PLAN
        if not path.is_file():
            return None
        try:
            settings = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise ValueError(f"{path}: cannot read the stored plan ({e})") from None
        return cls.of(settings if isinstance(settings, Mapping) else {}, str(path))


@dataclass(frozen=True)
class Cell:
    rate: Rate
    delta_pp: float | None = None  # versus the baseline over matched seeds
    p_value: float | None = None
    sequential: SequentialResult | None = None  # None without a plan


def _fmt_rate(r: Rate) -> str:
    return "n/a" if r.n == 0 else f"{100 * r.value:.1f} ({r.successes}/{r.n})"


def summarize(records: Iterable[dict], overall: bool = False,
              plan: SequentialPlan | None = None) -> tuple[list[str], list[str], dict]:
    """(policies, modes, {(task, perturbation): {(policy, mode): Cell}}) with the baseline mode first.

    Episodes pair up across modes by (task, perturbation, seed); `overall` pools every task into
    one row, keyed (-1, "all"). A pair counts from its later episode in the records' order, which is
    the order they were run."""
    outcomes: dict = defaultdict(dict)  # (task, pert, policy, mode) -> {(task, pert, seed): (success, order)}
    for order, r in enumerate(records):
        task, pert = int(r["task_id"]), r["perturbation"]
        row = (-1, "all") if overall else (task, pert)
        outcomes[(*row, r["policy"], r["mode"])][(task, pert, int(r["seed"]))] = (bool(r["success"]), order)
    policies = sorted({k[2] for k in outcomes})
    modes = sorted({k[3] for k in outcomes}, key=lambda m: (m != BASELINE, m))
    table: dict = defaultdict(dict)
    for (task, pert, policy, mode), by_seed in outcomes.items():
        rate = wilson(sum(success for success, _ in by_seed.values()), len(by_seed))
        base = outcomes.get((task, pert, policy, BASELINE))
        if mode == BASELINE or base is None:
            table[(task, pert)][(policy, mode)] = Cell(rate)
            continue
        seeds = sorted(by_seed.keys() & base.keys(), key=lambda s: max(base[s][1], by_seed[s][1]))
        pairs = [(base[s][0], by_seed[s][0]) for s in seeds]
        test = paired_test(pairs)
        sequential = None if plan is None else sequential_mcnemar(pairs, plan.planned(overall), plan.alpha)
        table[(task, pert)][(policy, mode)] = Cell(rate, 100 * test.delta, test.p_value, sequential)
    return policies, modes, dict(sorted(table.items()))


def _overall(records: list[dict], plan: SequentialPlan | None) -> dict:
    return summarize(records, overall=True, plan=plan)[2]


def _fmt_sequential(s: SequentialResult | None, mode: str) -> str:
    if s is None:
        return ""
    if s.at_pair is not None:
        better = short(mode) if s.decision == "treatment" else short(BASELINE)
        return f"{better} better (pair {s.at_pair})"
    return "not decided" if s.decision == "inconclusive" else f"undecided ({s.pairs}/{s.planned})"


def _sequential_note(plan: SequentialPlan | None) -> str:
    if plan is None:
        return "seq.: no plan (config.yaml) with these records, so no sequential verdict."
    return (f"seq.: exact sequential McNemar test at alpha={plan.alpha:g} over the pairs in the order run "
            "(O'Brien-Fleming-like alpha spending, a look after every discordant pair): where it says better, "
            "the run could stop at that pair; undecided (m/M): m of the M planned pairs so far; not decided: "
            "all planned pairs run.")


def infra_note(outstanding: Iterable[dict]) -> str:
    """A line on the episodes without a result after infrastructure failures ("" when there are none)."""
    outstanding = list(outstanding)
    if not outstanding:
        return ""
    cells = Counter(f"{r['policy']} {short(r['mode'])}" for r in outstanding)
    reasons = Counter(r["reason"] for r in outstanding).most_common(2)
    return (f"Not in the table: {len(outstanding)} episode(s) whose infrastructure failed and that have no result yet "
            f"({', '.join(f'{k}: {n}' for k, n in sorted(cells.items()))}; "
            f"{'; '.join(f'{n}x {reason[:160]}' for reason, n in reasons)}); see infra_failures.jsonl. "
            "Rerun `sgvla eval` with the same plan to retry them.")


def early_verdict_note(records: Iterable[dict]) -> str:
    """A line on the arm's episodes that a verdict stopped within their first second (`early_verdict`): counted in
    the table, but most likely a verdict meant for another episode ("" when there are none)."""
    early = [r for r in records if r.get("early_verdict")]
    if not early:
        return ""
    which = ", ".join(f"task {r['task_id']} seed {r['seed']} {short(r['mode'])}" for r in early[:5])
    return (f"Check: {len(early)} episode(s) were stopped by a verdict within their first second ({which}"
            f"{', ...' if len(early) > 5 else ''}; `early_verdict` in episodes.jsonl): if a verdict was not meant "
            "for its episode, delete that line and rerun the plan to run the episode again.")


def markdown_table(records: Iterable[dict], outstanding: Iterable[dict] = (),
                   plan: SequentialPlan | None = None) -> str:
    records = list(records)
    policies, modes, table = summarize(records, plan=plan)
    table.update(_overall(records, plan))
    head = ["Task", "Perturbation"]
    for policy in policies:
        for mode in modes:
            head.append(f"{policy} {short(mode)} (%)")
            if mode != BASELINE:
                head.append(f"{policy} Δ{short(mode)} (pp, p)")
                head.append(f"{policy} seq. {short(mode)}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (task, pert), cells in table.items():
        row = ["all" if task == -1 else str(task), pert]
        for policy in policies:
            for mode in modes:
                cell = cells.get((policy, mode))
                row.append(_fmt_rate(cell.rate) if cell else "")
                if mode != BASELINE:
                    row.append("" if cell is None or cell.delta_pp is None else f"{cell.delta_pp:+.1f} (p={cell.p_value:.2g})")
                    row.append(_fmt_sequential(cell and cell.sequential, mode))
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append("Success in % (successes/episodes); Δ: paired difference to std over matched seeds, "
                 "p: exact McNemar test. 95% Wilson intervals in the CSV.")
    lines.append(_sequential_note(plan))
    for note in (infra_note(outstanding), early_verdict_note(records)):
        if note:
            lines += ["", note]
    return "\n".join(lines)


def csv_rows(records: Iterable[dict], outstanding: Iterable[dict] = (),
             plan: SequentialPlan | None = None) -> list[dict]:
    records = list(records)
    _, _, table = summarize(records, plan=plan)
    table.update(_overall(records, plan))
    infra: Counter = Counter()
    for r in outstanding:
        infra[(int(r["task_id"]), r["perturbation"], r["policy"], r["mode"])] += 1
        infra[(-1, "all", r["policy"], r["mode"])] += 1
    rows = []
    for (task, pert), cells in table.items():
        for (policy, mode), c in sorted(cells.items()):
            rows.append({"task_id": "all" if task == -1 else task, "perturbation": pert, "policy": policy,
                         "mode": mode, "successes": c.rate.successes, "episodes": c.rate.n,
                         "success_rate": round(c.rate.value, 4), "ci95_low": round(c.rate.low, 4),
                         "ci95_high": round(c.rate.high, 4),
                         "delta_pp": "" if c.delta_pp is None else round(c.delta_pp, 2),
                         # p keeps 4 significant digits: over many matched episodes it can be tiny
                         "mcnemar_p": "" if c.p_value is None else float(f"{c.p_value:.4g}"),
                         **_sequential_columns(c.sequential, mode),
                         "infra_failed": infra[(task, pert, policy, mode)]})
    return rows


def _sequential_columns(s: SequentialResult | None, mode: str) -> dict:
    """sequential: the better mode once decided, else undecided or inconclusive (all planned pairs run)."""
    if s is None:
        return {"sequential": "", "sequential_at_pair": "", "planned_pairs": "", "alpha": ""}
    verdict = {"treatment": mode, "baseline": BASELINE}.get(s.decision, s.decision)
    return {"sequential": verdict, "sequential_at_pair": "" if s.at_pair is None else s.at_pair,
            "planned_pairs": s.planned, "alpha": s.alpha}


def plot(records: Iterable[dict], path: Path) -> Path:
    """Success per task per mode with 95% Wilson intervals, one panel per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    policies, modes, table = summarize(list(records))
    rows = list(table)
    fig, axes = plt.subplots(len(policies), 1, figsize=(max(6, 0.9 * len(rows) + 2), 3.2 * len(policies)),
                             squeeze=False)
    width = 0.8 / len(modes)
    for ax, policy in zip(axes[:, 0], policies):
        for i, mode in enumerate(modes):
            cells = [table[row].get((policy, mode)) for row in rows]
            x = np.arange(len(rows)) + (i - (len(modes) - 1) / 2) * width
            val = np.array([100 * c.rate.value if c else np.nan for c in cells])
            low = np.array([100 * c.rate.low if c else np.nan for c in cells])
            high = np.array([100 * c.rate.high if c else np.nan for c in cells])
            ax.bar(x, val, width, label=short(mode),
                   yerr=np.nan_to_num([val - low, high - val]), capsize=2)
        ax.set_xticks(np.arange(len(rows)), [f"T{t}\n{p}" for t, p in rows], fontsize=7)
        ax.set_ylim(0, 105)
        ax.set_ylabel("success (%)")
        ax.set_title(policy)
        ax.legend(fontsize=7, ncols=len(modes))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def write_report(run_dir: Path, records: list[dict], outstanding: Iterable[dict] = (),
                 plan: SequentialPlan | None = None) -> dict[str, Path]:
    """table.md, table.csv and success.png in `run_dir`; returns their paths."""
    import csv

    run_dir = Path(run_dir)
    outstanding = list(outstanding)
    if not records:
        raise ValueError(f"{run_dir}: no episode records to report")
    run_dir.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": run_dir / "table.md", "csv": run_dir / "table.csv", "plot": run_dir / "success.png"}
    paths["markdown"].write_text(markdown_table(records, outstanding, plan) + "\n")
    rows = csv_rows(records, outstanding, plan)
    with paths["csv"].open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(records, paths["plot"])
    return paths
