"""What `sgvla eval`, `merge` and `report` print when they are done: a summary that fits in 100 columns.

The report's main table has three columns per policy and mode (22 for the default plan): printed, it wrapped into
noise in any terminal. The terminal gets per policy each arm's pooled success k/n, its difference to the baseline
with the Holm-adjusted p and the sequential verdict, and the treatment against each control; then where the whole
report is (table.md, table.csv and report.html keep the per-task rows). The numbers are those of the report
(`sgvla.eval.report.summarize` and `comparisons`), never computed another way.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from pathlib import Path

from sgvla.eval.report import (BASELINE, SequentialPlan, _fmt_sequential, _labels, _mode_key, comparisons,
                               early_verdict_note, infra_note, random_weights_note, summarize)

WIDTH = 100


def _p(p: float | None) -> str:
    return "n/a" if p is None or p != p else f"{p:.2g}"


def summary_lines(records: Iterable[dict], outstanding: Iterable[dict] = (), plan: SequentialPlan | None = None,
                  html: Path | None = None, partial: str = "", width: int = WIDTH) -> list[str]:
    """The summary's lines, none wider than `width` but a path (the report's, on a line of its own)."""
    records, outstanding = list(records), list(outstanding)
    policies, modes, table = summarize(records, overall=True, plan=plan)
    cells = table.get((-1, "all"), {})
    labels = _labels(modes)
    comps = comparisons(records)
    holm = {(c.policy, c.treatment, c.reference): c for c in comps}
    w = max(len(labels[m]) for m in modes)
    notes = [partial, infra_note(outstanding), early_verdict_note(records), random_weights_note(records)]
    lines = [wrapped for note in notes if note for wrapped in textwrap.wrap(note, width)]
    for policy in policies:
        blocks = {(r["task_id"], r["perturbation"], r["seed"]) for r in records if r["policy"] == policy}
        lines.append(f"{policy}: {len(blocks)} matched block(s), all tasks pooled")
        for mode in sorted((m for m in modes if (policy, m) in cells), key=_mode_key):
            cell = cells[(policy, mode)]
            rate = cell.rate
            line = f"  {labels[mode]:<{w}}  {rate.successes:>4}/{rate.n:<4} {100 * rate.value:5.1f}%"
            c = holm.get((policy, mode, BASELINE))
            if c is not None:
                line += f"   Δ {100 * c.mcnemar.delta:+6.1f} pp vs {labels[BASELINE]}, Holm p {_p(c.p_holm):<6}"
            seq = _fmt_sequential(cell.sequential, mode)
            lines.append(line + (f"  seq. {seq}" if seq else ""))
        for c in comps:
            if c.policy == policy and c.reference != BASELINE:
                lines.append(f"  {labels.get(c.treatment, c.treatment)} vs {labels.get(c.reference, c.reference)}: "
                             f"{c.treatment_successes}/{c.pairs} vs {c.reference_successes}/{c.pairs}, "
                             f"Δ {100 * c.mcnemar.delta:+.1f} pp, Holm p {_p(c.p_holm)}")
    lines = [part for line in lines for part in (textwrap.wrap(line, width, subsequent_indent="      ",
                                                               drop_whitespace=False) if len(line) > width else [line])]
    if plan is not None:
        lines.append(f"seq.: exact sequential McNemar test at alpha={plan.alpha:g}, pairs in the order run (table.md)")
    lines.append("Per task: table.md and table.csv. Every episode, its prompt and arms side by side: report.html")
    if html is not None:
        lines.append(f"report: {html}")
    return lines


def terminal_summary(*args, **kwargs) -> str:
    """`summary_lines` as one text."""
    return "\n".join(summary_lines(*args, **kwargs))
