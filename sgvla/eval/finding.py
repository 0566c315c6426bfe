"""What a run found, said in sentences: for each policy under test, whether the scene graph changed its success
(scene_graph vs standard) and whether by its facts (scene_graph vs each control), with the Holm-adjusted p of the
report's comparisons (`sgvla.eval.report.comparisons`: the same numbers as comparisons.csv), and which plans to run
next. A policy that reads the true goal (the privileged expert) is no policy under test: the prompt cannot change
what it does, so it is a sanity check of the simulator and tasks, said apart.
"""

from __future__ import annotations

from collections.abc import Iterable

from sgvla.eval.report import BASELINE, TREATMENT, comparisons, is_control, short

# What to run after the main job, each with why.
NEXT_PLANS = ("config/eval/controls.yaml (a shuffled-graph control too)",
              "config/eval/table8.yaml with your policy (the paper's protocol)",
              "config/eval/so101_twin_ambiguous.yaml (the same question on the SO101 twin)")


def _p(p: float) -> str:
    return f"{p:.2g}"


def finding(records: Iterable[dict], privileged: Iterable[str] = (), alpha: float = 0.05,
            next_plans: Iterable[str] = NEXT_PLANS) -> list[str]:
    """One sentence per policy (its successes k/n per arm over the matched pairs), then the next plans; [] when no
    policy under test has scene_graph and standard episodes to compare."""
    records = list(records)
    privileged = set(privileged)
    comps = comparisons(records)
    lines = []
    for policy in sorted({c.policy for c in comps} - privileged):
        mine = {(c.treatment, c.reference): c for c in comps if c.policy == policy}
        main = mine.get((TREATMENT, BASELINE))
        if main is None:
            continue
        n = main.pairs
        change = "raised" if main.mcnemar.delta > 0 else "lowered" if main.mcnemar.delta < 0 else "did not change"
        said = (f"{policy}: the scene graph {change} success from {main.reference_successes}/{n} (standard) to "
                f"{main.treatment_successes}/{n} (scene_graph), Holm p = {_p(main.p_holm)}")
        if main.p_holm >= alpha:
            lines.append(f"{said}: not significant at alpha = {alpha}; more matched episodes would tell (raise the "
                         "plan's episodes= or tasks=).")
            continue
        controls = [c for (t, r), c in mine.items() if t == TREATMENT and is_control(r)]
        beaten = [c for c in controls if c.p_holm < alpha and c.mcnemar.delta > 0]
        said += "; significant"
        if controls:
            each = ", ".join(f"{short(c.reference)} {c.reference_successes}/{c.pairs} (Holm p = {_p(c.p_holm)})"
                             for c in controls)
            if len(beaten) == len(controls):
                said += f", and above every control ({each}): the graph helps by its facts, not its extra words"
            else:
                said += f", but not significantly above every control ({each}): its extra words may do part of it"
        lines.append(said + ".")
    for policy in sorted(privileged & {r["policy"] for r in records}):
        mine = [r for r in records if r["policy"] == policy]
        wins = sum(bool(r["success"]) for r in mine)
        lines.append(f"{policy} (reads the true goal: a sanity check, not a policy under test): {wins}/{len(mine)} "
                     "episodes succeeded" + (" (every arm)." if wins == len(mine) else
                                             "; it should succeed in every arm, so look at its failures."))
    if lines:
        lines.append("Next: " + "; ".join(next_plans) + ".")
    return lines
