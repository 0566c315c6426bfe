"""Tables and plots of an evaluation, regenerated from its JSONL records alone.

The main table follows the layout of the paper's Table 8: one row per (task, perturbation), and
per policy the success of the baseline mode (`standard`), of each other mode, and the paired
difference in percentage points with its exact McNemar p-value over matched seeds, and the verdict of
the exact sequential McNemar test (`sgvla.core.sequential`) at the plan's alpha over the matched pairs in
the order they were run (the order of `episodes.jsonl`): decided, and at which pair, or not yet. It is what
an operator reading the report during the run would have seen, so a run (on the physical arm, where every
episode costs time) may stop at a decision without inflating the type-I error. Each row and each mode is
tested on its own at alpha, as the McNemar column is (no correction across rows).

Below it, the paired comparisons of the pooled row (`comparisons`, also `comparisons.csv`): per policy every mode
against `standard`, and `scene_graph` against each control mode present (a mode whose registered class says
`control = True`: a context of the same shape without the scene's information, e.g. `filler`), each over the
episodes matched by (task, perturbation, seed), pooled over the tasks. Success is compared with the exact McNemar
test, and the p-values of one policy's comparisons (that family, and only it) are adjusted together with
Holm-Bonferroni: the adjusted p stands beside the raw one there and in the main table's pooled ("all") rows,
whose comparisons with `standard` are the same tests. The per-task rows keep their raw p (each row is its own
question; they are not corrected). Where the records carry a progress score (`progress`, in [0, 1]), each
comparison also gives the mean progress of both arms, the mean paired difference with a 95% percentile bootstrap
interval and the two-sided Wilcoxon signed-rank p (zero differences dropped; not corrected). Where they carry a
`failure_class`, a last table counts the classes of the failed episodes per policy and mode (`failures.csv`).
Records written before these fields existed still report: those parts are left out. The plots: success.png, every
mode (controls hatched) per task and pooled with its 95% Wilson interval; progress.png (where progress is known),
each mode's mean progress per task and pooled with a 95% bootstrap interval of the mean (episodes, not pairs).

Records of a spatially-referring set (`referring_family`, sgvla.core.referring) add a table of success per family
(families.csv) and the same paired comparisons within each family (family_comparisons.csv), Holm-adjusted over one
policy's comparisons in that family: which kinds of reference a scene graph resolves, and which it does not.
They read the records alone, so a merged run (`sgvla merge`) reports them as an unsharded one does.

Episodes whose infrastructure failed and that have no result yet (`infra_failures.jsonl`) are no
results: they are counted apart (a note under the table, `infra_failed` in the CSV), never as
policy failures.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import sgvla.core.controls  # noqa: F401  (registers the control modes, whose class says `control`)
from sgvla.core.context import ContextMode
from sgvla.core.referring import FAMILY_KEY
from sgvla.core.sequential import SequentialResult, sequential_mcnemar
from sgvla.core.stats import (WILCOXON_EXACT_MAX, Bootstrap, PairedTest, Rate, holm, paired_bootstrap, paired_test,
                              wilcoxon_signed_rank, wilson)

# The registered context modes say which one is the baseline and how each is labelled (ContextMode.baseline, .label).
BASELINE = next(name for name, mode in ContextMode.choices().items() if mode.baseline)
TREATMENT = "scene_graph"  # the mode compared with each control
FAILURE_CLASSES = ("wrong_object", "missed_grasp", "dropped", "timed_out", "gave_up", "perceived_nothing", "unknown")
BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED = 10_000, 0


def short(mode: str) -> str:
    """A mode's label in report columns and plots: its registered `label`, else its name."""
    registered = ContextMode.choices().get(mode)
    return (registered.label if registered is not None else "") or mode


def is_control(mode: str) -> bool:
    """Whether a mode is a control: its registered class says so (`ContextMode.control`); an unregistered name is not."""
    return bool(getattr(ContextMode.choices().get(mode), "control", False))


def _mode_key(mode: str) -> tuple:
    """The baseline first, then the other modes, then the controls, each by name."""
    return mode != BASELINE, is_control(mode), mode


def _labels(modes: Iterable[str]) -> dict[str, str]:
    """short() per mode, the name instead where two modes would share a label."""
    modes = list(modes)
    count = Counter(short(m) for m in modes)
    return {m: short(m) if count[short(m)] == 1 else m for m in modes}


@dataclass(frozen=True)
class SequentialPlan:
    """What the sequential verdict takes from the evaluation plan, fixed before its first episode: alpha, and
    how many matched pairs a row can hold (the seeds of a cell; times the tasks in the pooled row)."""

    alpha: float
    seeds: int
    tasks: int
    parts: tuple = ()  # (policy, seeds, tasks) of the policies that run a part of the plan (max_episodes, max_tasks)

    def planned(self, overall: bool, policy: str | None = None) -> int:
        seeds, tasks = next(((s, t) for name, s, t in self.parts if name == policy), (self.seeds, self.tasks))
        return seeds * (tasks if overall else 1)

    @classmethod
    def of(cls, settings: Mapping, where: str = "the plan") -> SequentialPlan:
        """From a plan's settings as `config.yaml` stores them; a plan written before `alpha` existed has the
        default."""
        from sgvla.eval.config import EvalConfig

        try:
            seeds, tasks = int(settings["episodes"]), len(settings["tasks"])
            parts = tuple((p.get("name") or p["type"], min(seeds, int(p.get("max_episodes") or seeds)),
                           min(tasks, int(p.get("max_tasks") or tasks))) for p in settings.get("policies") or ()
                          if isinstance(p, Mapping) and (p.get("max_episodes") or p.get("max_tasks")))
            plan = cls(float(settings.get("alpha", EvalConfig.alpha)), seeds, tasks, parts)
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
    modes = sorted({k[3] for k in outcomes}, key=_mode_key)
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
        sequential = None if plan is None else sequential_mcnemar(pairs, plan.planned(overall, policy), plan.alpha)
        table[(task, pert)][(policy, mode)] = Cell(rate, 100 * test.delta, test.p_value, sequential)
    return policies, modes, dict(sorted(table.items()))


def _overall(records: list[dict], plan: SequentialPlan | None) -> dict:
    return summarize(records, overall=True, plan=plan)[2]


@dataclass(frozen=True)
class Outcome:
    """What the comparisons take from one episode record."""

    success: bool
    progress: float | None  # None: not recorded, or unknown
    failure_class: str | None  # None: not recorded


def _progress(r: Mapping) -> float | None:
    p = r.get("progress")
    if p is None or isinstance(p, bool):
        return None
    try:
        p = float(p)
    except (TypeError, ValueError):
        return None
    return p if math.isfinite(p) else None


def _arms(records: Iterable[dict]) -> dict[tuple[str, str], dict[tuple, Outcome]]:
    """{(policy, mode): {(task, perturbation, seed): Outcome}}: every arm's episodes, all tasks pooled."""
    arms: dict = defaultdict(dict)
    for r in records:
        fc = r.get("failure_class")
        arms[(r["policy"], r["mode"])][(int(r["task_id"]), r["perturbation"], int(r["seed"]))] = Outcome(
            bool(r["success"]), _progress(r), None if fc is None else str(fc))
    return dict(arms)


@dataclass(frozen=True)
class Comparison:
    """`treatment` against `reference` for one policy over their matched episodes (all tasks pooled).

    mcnemar: the exact McNemar test of the pairs (its only_baseline counts pairs only the reference won);
    p_holm: its p adjusted with Holm-Bonferroni over the policy's comparisons (`family` of them).
    progress_*: over the pairs where both episodes have a progress score (progress_pairs of them; None without);
    progress_delta: the mean paired difference (treatment - reference) with its 95% bootstrap interval."""

    policy: str
    treatment: str
    reference: str
    mcnemar: PairedTest
    treatment_successes: int
    reference_successes: int
    p_holm: float
    family: int
    progress_pairs: int = 0
    treatment_progress: float | None = None
    reference_progress: float | None = None
    progress_delta: Bootstrap | None = None
    wilcoxon_p: float | None = None

    @property
    def pairs(self) -> int:
        return self.mcnemar.n_pairs


def planned_comparisons(modes: Iterable[str]) -> list[tuple[str, str]]:
    """(treatment, reference) pairs among the modes present: every mode against the baseline, then scene_graph
    against each control (only where both are present)."""
    modes = sorted(set(modes), key=_mode_key)
    pairs = [(m, BASELINE) for m in modes if m != BASELINE and BASELINE in modes]
    if TREATMENT in modes:
        pairs += [(TREATMENT, m) for m in modes if m != TREATMENT and m != BASELINE and is_control(m)]
    return pairs


def comparisons(records: Iterable[dict]) -> list[Comparison]:
    """The paired comparisons of each policy (`planned_comparisons` of its modes) over the episodes matched by
    (task, perturbation, seed); Holm-adjusted per policy over the comparisons that have matched pairs."""
    arms = _arms(records)
    out: list[Comparison] = []
    for policy in sorted({p for p, _ in arms}):
        found = []
        for treatment, reference in planned_comparisons(m for p, m in arms if p == policy):
            t_arm, r_arm = arms[(policy, treatment)], arms[(policy, reference)]
            keys = sorted(t_arm.keys() & r_arm.keys())
            if not keys:
                continue
            test = paired_test([(r_arm[k].success, t_arm[k].success) for k in keys])
            progress = [(r_arm[k].progress, t_arm[k].progress) for k in keys
                        if r_arm[k].progress is not None and t_arm[k].progress is not None]
            extra: dict = {}
            if progress:
                extra = {"progress_pairs": len(progress),
                         "treatment_progress": sum(t for _, t in progress) / len(progress),
                         "reference_progress": sum(r for r, _ in progress) / len(progress),
                         "progress_delta": paired_bootstrap(progress, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED),
                         "wilcoxon_p": wilcoxon_signed_rank(progress)}
            found.append((treatment, reference, test, sum(t_arm[k].success for k in keys),
                          sum(r_arm[k].success for k in keys), extra))
        adjusted = holm([f[2].p_value for f in found])
        out += [Comparison(policy, t, r, test, ts, rs, h, len(found), **extra)
                for (t, r, test, ts, rs, extra), h in zip(found, adjusted)]
    return out


def _fmt_p(p: float | None) -> str:
    return "n/a" if p is None or p != p else f"{p:.2g}"


def _fmt_progress(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def comparisons_markdown(comps: list[Comparison]) -> str:
    """The comparisons table with its notes ("" without comparisons); progress columns only where some are known."""
    if not comps:
        return ""
    with_progress = any(c.progress_pairs for c in comps)
    head = ["Policy", "Comparison", "Pairs", "T (%)", "R (%)", "Δ (pp)", "p", "Holm p"]
    if with_progress:
        head += ["T prog.", "R prog.", "Δ prog. [95% CI]", "Wilcoxon p"]
    lines = ["### Paired comparisons, all tasks pooled", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in comps:
        n = c.pairs
        row = [c.policy, f"{short(c.treatment)} vs {short(c.reference)}", str(n),
               f"{100 * c.treatment_successes / n:.1f}", f"{100 * c.reference_successes / n:.1f}",
               f"{100 * c.mcnemar.delta:+.1f}", _fmt_p(c.mcnemar.p_value), _fmt_p(c.p_holm)]
        if with_progress:
            d = c.progress_delta
            delta = "n/a" if d is None else f"{d.mean:+.2f} [{d.low:+.2f}, {d.high:+.2f}]"
            if d is not None and c.progress_pairs < n:
                delta += f" (n={c.progress_pairs})"
            row += [_fmt_progress(c.treatment_progress), _fmt_progress(c.reference_progress), delta,
                    _fmt_p(c.wilcoxon_p)]
        lines.append("| " + " | ".join(row) + " |")
    families = ", ".join(sorted({f"{c.policy}: {c.family}" for c in comps}))
    lines += ["", "T vs R over the episodes of both modes matched by task, perturbation and seed, all tasks pooled: "
              "every mode vs std, and sg vs each control. T, R: success (%) over those pairs; Δ: T − R; "
              "p: exact McNemar test; Holm p: p adjusted (Holm-Bonferroni) over the comparisons of the same policy in "
              f"this table ({families}), the family-wise error at alpha holds where Holm p <= alpha; the Holm p "
              "of the main table's all rows are these."]
    if with_progress:
        lines.append(f"Progress (0-1) over the pairs where both episodes have one (n= where fewer than the pairs): "
                     "means of T and R; Δ prog.: mean paired difference T − R with a 95% percentile bootstrap "
                     f"interval ({BOOTSTRAP_RESAMPLES:,} resamples of the pairs, seed {BOOTSTRAP_SEED}); Wilcoxon p: "
                     "two-sided signed-rank test of the differences (zero differences dropped; exact up to "
                     f"{WILCOXON_EXACT_MAX} nonzero ones), not corrected.")
    return "\n".join(lines)


def comparison_rows(comps: list[Comparison]) -> list[dict]:
    """comparisons.csv: one row per comparison; progress columns empty where unknown."""
    def num(x: float | None, digits: int = 4) -> float | str:
        return "" if x is None or x != x else round(x, digits)

    def p(x: float | None) -> float | str:  # 4 significant digits: over many pairs p can be tiny
        return "" if x is None or x != x else float(f"{x:.4g}")

    rows = []
    for c in comps:
        d, n = c.progress_delta, c.pairs
        rows.append({"policy": c.policy, "treatment": c.treatment, "reference": c.reference, "pairs": n,
                     "treatment_successes": c.treatment_successes, "reference_successes": c.reference_successes,
                     "treatment_success_rate": round(c.treatment_successes / n, 4),
                     "reference_success_rate": round(c.reference_successes / n, 4),
                     "only_treatment": c.mcnemar.only_treatment, "only_reference": c.mcnemar.only_baseline,
                     "delta_pp": round(100 * c.mcnemar.delta, 2), "mcnemar_p": p(c.mcnemar.p_value),
                     "mcnemar_p_holm": p(c.p_holm), "holm_family": c.family, "progress_pairs": c.progress_pairs,
                     "treatment_progress": num(c.treatment_progress), "reference_progress": num(c.reference_progress),
                     "progress_delta": num(d and d.mean), "progress_ci95_low": num(d and d.low),
                     "progress_ci95_high": num(d and d.high), "wilcoxon_p": p(c.wilcoxon_p)})
    return rows


COMPARISON_COLUMNS = list(comparison_rows([Comparison("", "", "", PairedTest(1, 0, 0, 0.0, 1.0), 0, 0, 1.0, 1)])[0])


def failure_counts(records: Iterable[dict]) -> tuple[list[str], list[dict]] | None:
    """(classes, one row per policy and mode: episodes, failed, count per class among the failed and `unclassified`
    for failed episodes without a class); None when no record has a `failure_class`."""
    arms = _arms(records)
    if not any(o.failure_class is not None for arm in arms.values() for o in arm.values()):
        return None
    seen = {o.failure_class for arm in arms.values() for o in arm.values() if not o.success and o.failure_class}
    classes = list(FAILURE_CLASSES) + sorted(seen - set(FAILURE_CLASSES))
    rows = []
    for policy, mode in sorted(arms, key=lambda k: (k[0], _mode_key(k[1]))):
        failed = [o for o in arms[(policy, mode)].values() if not o.success]
        count = Counter(o.failure_class or "" for o in failed)
        rows.append({"policy": policy, "mode": mode, "episodes": len(arms[(policy, mode)]), "failed": len(failed),
                     **{c: count[c] for c in classes}, "unclassified": count[""]})
    return classes, rows


def failures_markdown(counted: tuple[list[str], list[dict]] | None) -> str:
    if counted is None:
        return ""
    classes, rows = counted
    unclassified = any(r["unclassified"] for r in rows)
    head = ["Policy", "Mode", "Episodes", "Failed"] + [c.replace("_", " ") for c in classes]
    head += ["not classified"] if unclassified else []
    lines = ["### Failure classes, all tasks pooled", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["policy"], short(r["mode"]), str(r["episodes"]), str(r["failed"])] + [str(r[c]) for c in classes]
        lines.append("| " + " | ".join(cells + ([str(r["unclassified"])] if unclassified else [])) + " |")
    lines += ["", "Failed episodes of each policy and mode by their failure class (`failure_class` in episodes.jsonl)"
              + ("; not classified: failed episodes recorded without a class." if unclassified else ".")]
    return "\n".join(lines)


def _fmt_sequential(s: SequentialResult | None, mode: str) -> str:
    if s is None:
        return ""
    if s.at_pair is not None:
        better = short(mode) if s.decision == "treatment" else short(BASELINE)
        return f"{better} better (pair {s.at_pair})"
    return "inconclusive" if s.decision == "inconclusive" else f"undecided ({s.pairs}/{s.planned})"


def _sequential_note(plan: SequentialPlan | None) -> str:
    if plan is None:
        return "seq.: no plan (config.yaml) with these records, so no sequential verdict."
    return (f"seq.: exact sequential McNemar test at alpha={plan.alpha:g} over the pairs in the order run "
            "(O'Brien-Fleming-like alpha spending, a look after every discordant pair): where it says better, "
            "the run could stop at that pair; undecided (m/M): m of the M planned pairs so far; inconclusive: "
            "all planned pairs run without a decision (as `sequential` in table.csv).")


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


def random_weights_note(records: Iterable[dict]) -> str:
    """A line naming the policies evaluated with random weights on purpose (`random_weights: true`): their numbers
    measure the machinery, not a policy ("" when there are none)."""
    policies = sorted({r["policy"] for r in records if r.get("random_weights")})
    if not policies:
        return ""
    return (f"Random weights: {', '.join(policies)} ran with randomly initialised weights on purpose "
            "(random_weights: true); their success says nothing about a trained policy.")


def by_family(records: Iterable[dict]) -> dict[tuple[str, str], list[dict]]:
    """{(perturbation, referring family): its records}, for the records that carry a family, in family order."""
    groups: dict = defaultdict(list)
    for r in records:
        if r.get(FAMILY_KEY):
            groups[(r["perturbation"], str(r[FAMILY_KEY]))].append(r)
    return dict(sorted(groups.items()))


def family_rows(records: Iterable[dict]) -> tuple[list[dict], list[dict]]:
    """(families.csv: success per perturbation, family, policy and mode with its 95% Wilson interval;
    family_comparisons.csv: `comparisons` within each family, Holm over one policy's comparisons in that family)."""
    arms, compared = [], []
    for (pert, family), group in by_family(records).items():
        outcomes: dict = defaultdict(list)
        for r in group:
            outcomes[(r["policy"], r["mode"])].append(bool(r["success"]))
        for (policy, mode), wins in sorted(outcomes.items(), key=lambda kv: (kv[0][0], _mode_key(kv[0][1]))):
            rate = wilson(sum(wins), len(wins))
            arms.append({"perturbation": pert, "family": family, "policy": policy, "mode": mode,
                         "successes": rate.successes, "episodes": rate.n, "success_rate": round(rate.value, 4),
                         "ci95_low": round(rate.low, 4), "ci95_high": round(rate.high, 4)})
        compared += [{"perturbation": pert, "family": family, **row} for row in comparison_rows(comparisons(group))]
    return arms, compared


def families_markdown(arms: list[dict], compared: list[dict]) -> str:
    """The per-family table ("" without families): each arm's k/n, then scene_graph's comparisons (with std and each
    control: Δ with its Holm p; the controls' own against std are in family_comparisons.csv)."""
    if not arms:
        return ""
    modes = sorted({a["mode"] for a in arms}, key=_mode_key)
    pairs = list(dict.fromkeys((c["treatment"], c["reference"]) for c in compared if c["treatment"] == TREATMENT))
    head = ["Perturbation", "Family", "Policy", *(f"{short(m)} (%)" for m in modes),
            *(f"Δ {short(t)} vs {short(r)} (pp, Holm p)" for t, r in pairs)]
    lines = ["### Success per referring family", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rate = {(a["perturbation"], a["family"], a["policy"], a["mode"]): a for a in arms}
    comp = {(c["perturbation"], c["family"], c["policy"], c["treatment"], c["reference"]): c for c in compared}
    for pert, family, policy in dict.fromkeys((a["perturbation"], a["family"], a["policy"]) for a in arms):
        row = [pert, family, policy]
        for m in modes:
            a = rate.get((pert, family, policy, m))
            row.append("" if a is None else f"{100 * a['success_rate']:.1f} ({a['successes']}/{a['episodes']})")
        for t, r in pairs:
            c = comp.get((pert, family, policy, t, r))
            row.append("" if c is None else f"{c['delta_pp']:+.1f} (p={_fmt_p(c['mcnemar_p'] or None)}, "
                                            f"Holm {_fmt_p(c['mcnemar_p_holm'] or None)}, n={c['pairs']})")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Per family (`referring_family` of the records), episodes matched by task, perturbation and seed "
              "within it; Δ: T − R in pp; p: exact McNemar; Holm: adjusted over the policy's comparisons in that "
              "family (every mode vs std and sg vs each control: family_comparisons.csv has them all)."]
    return "\n".join(lines)


def _holm_vs_baseline(comps: list[Comparison]) -> dict[tuple[str, str], float]:
    """{(policy, mode): Holm p} of the comparisons with the baseline, for the main table's pooled rows."""
    return {(c.policy, c.treatment): c.p_holm for c in comps if c.reference == BASELINE}


def markdown_table(records: Iterable[dict], outstanding: Iterable[dict] = (),
                   plan: SequentialPlan | None = None) -> str:
    """The report's markdown: the main table with its notes, then the comparisons and the failure classes."""
    records = list(records)
    return _markdown(records, outstanding, plan, comparisons(records))


def _markdown(records: list[dict], outstanding: Iterable[dict], plan: SequentialPlan | None,
              comps: list[Comparison]) -> str:
    sections = [_main_table(records, outstanding, plan, _holm_vs_baseline(comps)), comparisons_markdown(comps),
                families_markdown(*family_rows(records)), failures_markdown(failure_counts(records))]
    return "\n\n".join(s for s in sections if s)


def _main_table(records: list[dict], outstanding: Iterable[dict], plan: SequentialPlan | None,
                holm_p: Mapping[tuple[str, str], float]) -> str:
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
                    adjusted = holm_p.get((policy, mode)) if task == -1 else None
                    row.append("" if cell is None or cell.delta_pp is None else f"{cell.delta_pp:+.1f} "
                               f"(p={cell.p_value:.2g}" + ("" if adjusted is None else f", Holm {adjusted:.2g}") + ")")
                    row.append(_fmt_sequential(cell and cell.sequential, mode))
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append("Success in % (successes/episodes); Δ: paired difference to std over matched seeds, "
                 "p: exact McNemar test, uncorrected in the per-task rows; Holm (all rows): the p adjusted "
                 "(Holm-Bonferroni) over the policy's comparisons below. 95% Wilson intervals in the CSV.")
    lines.append(_sequential_note(plan))
    for note in (infra_note(outstanding), early_verdict_note(records), random_weights_note(records)):
        if note:
            lines += ["", note]
    return "\n".join(lines)


def csv_rows(records: Iterable[dict], outstanding: Iterable[dict] = (),
             plan: SequentialPlan | None = None) -> list[dict]:
    records = list(records)
    return _csv_rows(records, outstanding, plan, comparisons(records))


def _csv_rows(records: list[dict], outstanding: Iterable[dict], plan: SequentialPlan | None,
              comps: list[Comparison]) -> list[dict]:
    _, _, table = summarize(records, plan=plan)
    table.update(_overall(records, plan))
    holm_p = _holm_vs_baseline(comps)
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
                         # Holm-adjusted over the policy's comparisons (comparisons.csv): pooled rows only
                         "mcnemar_p_holm": float(f"{holm_p[(policy, mode)]:.4g}")
                         if task == -1 and (policy, mode) in holm_p else "",
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


def _wrap(name: str, width: int = 12) -> str:
    """A perturbation name on lines of about `width` characters, broken after its underscores."""
    lines: list[str] = []
    for part in re.split(r"(?<=_)", name):
        if lines and len(lines[-1]) + len(part) <= width:
            lines[-1] += part
        else:
            lines.append(part)
    return "\n".join(lines)


def _group_labels(groups: list[tuple]) -> tuple[list[str], str]:
    """(tick label per group, x-axis label). With one perturbation throughout, the ticks are task ids alone and the
    axis names the perturbation; otherwise each tick names its perturbation, wrapped, so neighbours never overlap."""
    perturbations = sorted({p for t, p in groups if t != -1})
    if len(perturbations) <= 1:
        axis = f"task (perturbation: {perturbations[0]})" if perturbations else "task"
        return ["all" if t == -1 else f"T{t}" for t, _ in groups], axis
    return ["all" if t == -1 else f"T{t}\n{_wrap(p)}" for t, p in groups], "task, perturbation"


def bar_figure(groups: list[tuple], policies: list[str], modes: list[str], cell, ylabel: str, ylim: float):
    """Grouped bars, one panel per policy: per group (a task row, the pooled "all" last) a bar per mode,
    `cell(group, policy, mode)` giving (value, low, high, text) or None. Every bar is outlined and carries its text
    (the count k/n) above its interval; a bar at 0 is a stub, so a mode that never succeeded shows as one and is
    not mistaken for one that did not run. Controls are hatched. One legend for the figure, below the panels,
    where it covers no bar. Returns the matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    labels = _labels(modes)
    ticks, xlabel = _group_labels(groups)
    lines = max(t.count("\n") + 1 for t in ticks)
    width_in = max(6.0, 0.17 * len(groups) * len(modes) + 1.8)
    panel_in, legend_in = 2.9 + 0.12 * lines, 0.35 * math.ceil(len(modes) / 6) + 0.15
    fig, axes = plt.subplots(len(policies), 1, figsize=(width_in, panel_in * len(policies) + legend_in),
                             squeeze=False)
    width = 0.8 / len(modes)
    stub = 0.02 * ylim
    for ax, policy in zip(axes[:, 0], policies):
        for i, mode in enumerate(modes):
            color = f"C{i % 10}"
            x = np.arange(len(groups)) + (i - (len(modes) - 1) / 2) * width
            cells = [cell(group, policy, mode) for group in groups]
            val, low, high = (np.array([np.nan if c is None else c[j] for c in cells], dtype=float) for j in range(3))
            shown = np.where(val < stub, stub, val)  # a 0 (or nearly) is a stub, outlined: visible
            ax.bar(x, shown, width, color=color, edgecolor="black", linewidth=0.5,
                   label=labels[mode] + (" (control)" if is_control(mode) else ""),
                   hatch="//" if is_control(mode) else None)
            ax.errorbar(x, val, yerr=np.nan_to_num([val - low, high - val]), fmt="none", ecolor="black",
                        elinewidth=1, capsize=2)
            for xi, c in zip(x, cells):
                if c is not None and len(c) > 3 and c[3]:
                    ax.text(xi, max(c[0], c[2], stub) + 0.02 * ylim, c[3], rotation=90, ha="center", va="bottom",
                            fontsize=6)
        if len(groups) > 1 and groups[-1][0] == -1:  # the pooled group apart from the tasks
            ax.axvline(len(groups) - 1.5, color="0.6", linewidth=0.8, linestyle="--")
        ax.set_xticks(np.arange(len(groups)), ticks, fontsize=7)
        ax.set_xlim(-0.6, len(groups) - 0.4)
        ax.set_ylim(0, 1.22 * ylim)  # headroom for the counts above the intervals
        ax.set_yticks(np.linspace(0, ylim, 6))
        ax.set_ylabel(ylabel)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_title(policy)
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncols=min(len(modes), 6), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, legend_in / fig.get_figheight(), 1, 1))
    return fig


def _save(fig, path: Path) -> Path:
    """The figure as `path`, whole or not at all (written beside it, then moved over it)."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fig.savefig(tmp, dpi=150, format=path.suffix.lstrip(".") or "png")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path


def success_figure(records: Iterable[dict]):
    """Success per task and pooled ("all") per mode (controls hatched) with 95% Wilson intervals and k/n on each bar,
    one panel per policy."""
    records = list(records)
    policies, modes, table = summarize(records)
    table.update(_overall(records, None))

    def cell(group, policy, mode):
        c = table[group].get((policy, mode))
        return None if c is None else (100 * c.rate.value, 100 * c.rate.low, 100 * c.rate.high,
                                       f"{c.rate.successes}/{c.rate.n}")

    return bar_figure(list(table), policies, modes, cell, "success (%)", 100)


def plot(records: Iterable[dict], path: Path) -> Path:
    """success.png: `success_figure`."""
    return _save(success_figure(records), Path(path))


def progress_cells(records: Iterable[dict]) -> dict[tuple, dict[tuple[str, str], Bootstrap]]:
    """{(task, perturbation) or (-1, "all"): {(policy, mode): mean progress with its 95% bootstrap interval}} over
    the episodes with a progress score; {} when none has one."""
    values: dict = defaultdict(lambda: defaultdict(list))
    for r in records:
        p = _progress(r)
        if p is not None:
            for group in ((int(r["task_id"]), r["perturbation"]), (-1, "all")):
                values[group][(r["policy"], r["mode"])].append(p)
    return {group: {arm: paired_bootstrap(v, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED) for arm, v in arms.items()}
            for group, arms in sorted(values.items(), key=lambda kv: (kv[0][0] == -1, kv[0]))}  # pooled last


def progress_figure(records: Iterable[dict]):
    """Mean progress per task and pooled per mode with 95% bootstrap intervals and the episodes (n=) on each bar,
    one panel per policy; None when no episode has a progress score."""
    records = list(records)
    cells = progress_cells(records)
    if not cells:
        return None
    counts: Counter = Counter()
    for r in records:
        if _progress(r) is not None:
            for group in ((int(r["task_id"]), r["perturbation"]), (-1, "all")):
                counts[(group, r["policy"], r["mode"])] += 1
    policies = sorted({p for arms in cells.values() for p, _ in arms})
    modes = sorted({m for arms in cells.values() for _, m in arms}, key=_mode_key)

    def cell(group, policy, mode):
        b = cells[group].get((policy, mode))
        return None if b is None else (*b, f"n={counts[(group, policy, mode)]}")

    return bar_figure(list(cells), policies, modes, cell, "progress (mean)", 1.0)


def progress_plot(records: Iterable[dict], path: Path) -> Path | None:
    """progress.png: `progress_figure`; None (no file) when no episode has a progress score."""
    fig = progress_figure(records)
    return None if fig is None else _save(fig, Path(path))


def _replace(path: Path, write) -> Path:
    """`write(tmp)` into a file beside `path`, then moved over it: an interrupted report leaves each file whole, the
    new one or the previous one."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _write_csv(path: Path, rows: list[dict], fields: list[str]) -> Path:
    import csv

    def write(tmp: Path) -> None:
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)

    return _replace(path, write)


def write_report(run_dir: Path, records: list[dict], outstanding: Iterable[dict] = (),
                 plan: SequentialPlan | None = None, saved: list[Path] | None = None, partial: str = "",
                 records_dir: Path | None = None) -> dict[str, Path]:
    """table.md, table.csv, comparisons.csv and success.png in `run_dir`, and failures.csv and progress.png where the
    records have failure classes and progress scores, then report.html (`sgvla.eval.html_report`: those numbers, the
    plots and every episode); returns their paths. Each file is written whole or not at all; `saved`, where given,
    gains each one's path as it is written, so a caller interrupted part way (Ctrl-C while the plots draw) can say
    which are new. `partial` (`partial_note`) heads table.md and the page of a run that lacks planned episodes;
    `records_dir` is the folder of the records and their videos/ (default `run_dir`)."""
    run_dir = Path(run_dir)
    saved = [] if saved is None else saved
    records, outstanding = list(records), list(outstanding)
    if not records:
        raise ValueError(f"{run_dir}: no episode records to report")
    run_dir.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": run_dir / "table.md", "csv": run_dir / "table.csv", "comparisons": run_dir / "comparisons.csv",
             "plot": run_dir / "success.png"}
    comps = comparisons(records)
    text = (f"**{partial}**\n\n" if partial else "") + _markdown(records, outstanding, plan, comps) + "\n"
    saved.append(_replace(paths["markdown"], lambda tmp: tmp.write_text(text)))
    rows = _csv_rows(records, outstanding, plan, comps)
    saved.append(_write_csv(paths["csv"], rows, list(rows[0])))
    compared = comparison_rows(comps)
    saved.append(_write_csv(paths["comparisons"], compared, COMPARISON_COLUMNS))
    family_arms, family_compared = family_rows(records)
    if family_arms:
        paths["families"], paths["family_comparisons"] = run_dir / "families.csv", run_dir / "family_comparisons.csv"
        saved.append(_write_csv(paths["families"], family_arms, list(family_arms[0])))
        saved.append(_write_csv(paths["family_comparisons"], family_compared,
                                ["perturbation", "family", *COMPARISON_COLUMNS]))
    counted = failure_counts(records)
    if counted is not None:
        paths["failures"] = run_dir / "failures.csv"
        saved.append(_write_csv(paths["failures"], counted[1], list(counted[1][0])))
    saved.append(plot(records, paths["plot"]))
    progress = progress_plot(records, run_dir / "progress.png")
    if progress is not None:
        paths["progress_plot"] = progress
        saved.append(progress)
    paths["html"] = run_dir / "report.html"
    saved.append(_write_html(paths["html"], records, outstanding, rows, compared, partial,
                             Path(records_dir or run_dir), {"success": paths["plot"], "progress": progress},
                             (family_arms, family_compared)))
    return paths


def partial_note(missing: int, planned: int, why: str) -> str:
    """The line that heads the report of a run without all its planned episodes: how many are missing, and why."""
    return (f"Partial run: {missing} of the plan's {planned} episodes have no result and are not in this report "
            f"({why}).")


def _write_html(path: Path, records: list[dict], outstanding: list[dict], rows: list[dict], compared: list[dict],
                partial: str, records_dir: Path, plots: Mapping[str, Path | None],
                families: tuple[list[dict], list[dict]] = ([], [])) -> Path:
    """report.html from the rows just written to table.csv, comparisons.csv and the family CSVs (one source)."""
    from sgvla.eval.html_report import Page, render

    modes = sorted({r["mode"] for r in records}, key=_mode_key)
    page = Page(title=f"sgvla report: {records_dir.resolve().name}", records=records, table_rows=rows,
                comparison_rows=compared, labels=_labels(modes), controls=frozenset(filter(is_control, modes)),
                baseline=BASELINE, treatment=TREATMENT, run_dir=records_dir,
                notes=[infra_note(outstanding), early_verdict_note(records), random_weights_note(records)],
                partial=partial, plots={k: v for k, v in plots.items() if v is not None},
                family_rows=families[0], family_comparison_rows=families[1])
    html = render(page, path.parent)
    return _replace(path, lambda tmp: tmp.write_text(html, encoding="utf-8"))


def interrupted_note(run_dir: Path, saved: Iterable[Path]) -> str:
    """The one line of a report interrupted (Ctrl-C) while it was written: what is new, and how to finish it."""
    names = ", ".join(Path(p).name for p in saved) or "no report file"
    return (f"interrupted while writing the report: saved {names}; the records are complete, "
            f"`sgvla report {run_dir}` writes the report again")
