"""``sgvla compare RUN_A RUN_B``: the matched episodes of two runs whose success, steps or actions differ (exit 1
when any do), and the plan settings they differ in that change outcomes (sgvla.eval.compare)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="List the episodes two runs disagree on (success, steps, actions).",
                       description="Match the episodes of two runs (run folders of sgvla eval, or records files of "
                                   "lerobot-eval --env.records) and list those whose success, steps or action "
                                   "digest differ; exit 1 when any do, 0 when every matched episode agrees, 2 when "
                                   "a run cannot be read or no episode matches. Says which plan settings that "
                                   "change outcomes differ between the runs.")
    p.add_argument("run_a", metavar="RUN_A", help="A run folder or a records (.jsonl) file.")
    p.add_argument("run_b", metavar="RUN_B", help="A run folder or a records (.jsonl) file.")
    p.set_defaults(func=run)


def _key(key) -> str:
    return f"task {key.task_id}, seed {key.seed}, {key.mode}, {key.perturbation or '-'}, {key.policy}"


def run(args: argparse.Namespace) -> int:
    from sgvla.eval.compare import CompareError, compare_runs, load_run

    try:
        a, b = load_run(args.run_a), load_run(args.run_b)
    except CompareError as e:
        print(f"sgvla compare: {e}")
        return 2
    result = compare_runs(a, b)
    policies = "" if result.by_policy else f" (policy {result.policies[0][0]} ~ {result.policies[1][0]})"
    print(f"{result.matched} matched episode(s){policies}; {len(result.only_a)} only in A ({a.path}), "
          f"{len(result.only_b)} only in B ({b.path})")
    if result.plan_differences:
        what = "plans" if result.plans_compared else "the records' settings (a run has no stored plan)"
        print(f"{what} differ in settings that change outcomes (A -> B):")
        print("\n".join(f"  {d}" for d in result.plan_differences))
    elif result.plans_compared:
        print("plans: the same in every setting that changes outcomes")
    if result.actions_unchecked:
        print(f"actions not compared for {result.actions_unchecked} episode(s): a record without action_digest")
    if not result.matched:
        print("sgvla compare: no episode of A is in B: nothing to compare")
        return 2
    if not result.differing:
        print(f"all {result.matched} matched episodes agree in success, steps and actions")
        return 0
    print(f"{len(result.differing)} of {result.matched} matched episode(s) differ (A -> B):")
    for diff in result.differing:
        fields = "; ".join(f"actions {str(va)[:12]} -> {str(vb)[:12]}" if name == "action_digest" else
                           f"{name} {va} -> {vb}" for name, (va, vb) in diff.fields.items())
        print(f"  {_key(diff.key)}: {fields}")
    return 1
