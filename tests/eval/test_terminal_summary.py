"""The summary `sgvla eval`, `merge` and `report` print (sgvla.eval.terminal_summary): at most 100 columns however
many policies and modes, per policy each arm's pooled k/n, Δ vs std with the Holm p of comparisons.csv and the
sequential verdict, then where report.html is; the wide table only in table.md."""

import csv
import json

from sgvla.cli import main
from sgvla.eval.report import SequentialPlan, write_report
from sgvla.eval.terminal_summary import WIDTH, summary_lines

from .test_html_report import record

MODES = ("standard", "scene_graph", "scene_graph_full", "bounding_boxes", "filler", "wrong_graph", "shuffled_graph")
POLICIES = ("prompt_grounded", "expert", "lerobot_pi05_libero_finetuned_with_a_long_name")


def many_records() -> list[dict]:
    """3 policies x 7 modes x 3 tasks x 4 seeds: the main table would be 2 + 3 * (1 + 6 * 3) = 59 columns."""
    out = []
    for p, policy in enumerate(POLICIES):
        for task in range(3):
            for seed in range(4):
                for m, mode in enumerate(MODES):
                    out.append(record(policy, task, mode, seed, (p + task + seed + m) % 3 != 0,
                                      prompt=f"pick up the bowl ({mode})"))
    return out


def test_the_summary_fits_in_100_columns_and_says_what_the_report_says(tmp_path):
    records = many_records()
    plan = SequentialPlan(alpha=0.0125, seeds=4, tasks=3)  # the verdicts too, at an alpha of many digits
    paths = write_report(tmp_path, records, plan=plan)
    lines = summary_lines(records, plan=plan, html=paths["html"])
    assert max(len(line) for line in lines[:-1]) <= WIDTH, "\n".join(lines)
    assert lines[-1] == f"report: {paths['html']}"
    assert max(len(line) for line in paths["markdown"].read_text().splitlines()) > 500  # the wide table stays there
    text = "\n".join(lines)
    pooled = [r for r in csv.DictReader(paths["csv"].open()) if r["task_id"] == "all"]
    assert len(pooled) == len(POLICIES) * len(MODES)
    for row in pooled:  # each arm's k/n, as table.csv's pooled row has it
        assert f"{row['successes']:>4}/{row['episodes']:<4}" in text, row
    for c in csv.DictReader(paths["comparisons"].open()):  # Δ vs std with the Holm p of comparisons.csv
        if c["reference"] == "standard":
            assert f"Δ {float(c['delta_pp']):+6.1f} pp vs std, Holm p {float(c['mcnemar_p_holm']):.2g}" in text, c
    for policy in POLICIES:
        assert f"{policy}: 12 matched block(s), all tasks pooled" in text
    assert text.count("seq. undecided (12/12)") + text.count("seq. inconclusive") + text.count(" better (pair ") == \
        len(POLICIES) * (len(MODES) - 1) and "McNemar test at alpha=0.0125" in text


def test_sgvla_report_prints_the_summary_not_the_table(tmp_path, capsys):
    records = many_records()[:84]  # one policy
    run = tmp_path / "run"
    write_report(run, records)
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    capsys.readouterr()
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert not [line for line in out if line.startswith("|")]  # no markdown table in the terminal
    summary = out[:out.index(f"report: {run / 'report.html'}")]
    assert summary and max(len(line) for line in summary) <= WIDTH
    assert any(line.startswith("  sg ") and "Holm p" in line for line in summary)


def test_the_ros_evaluator_prints_the_summary_sgvla_eval_prints(tmp_path, capsys):
    """`sgvla launch sim_eval`'s evaluator node ends with `TopicEvaluation.write_report` (sgvla.nodegraph.evaluation):
    on stdout the summary of `sgvla eval`, line for line, with the report's path, and no wide table."""
    from sgvla.core.episode import EpisodeRecord
    from sgvla.nodegraph.evaluation import TopicEvaluation

    from .plans import small_config

    modes = ["standard", "scene_graph", "filler", "wrong_graph"]
    cfg = small_config(tmp_path / "run", modes=modes, tasks=[0, 1], episodes=3)
    evaluation = TopicEvaluation(cfg)
    kept = []
    while (goal := evaluation.next_goal()) is not None:  # the plan's goals, each answered as the policy node does
        key = goal.key
        done = record(key.policy, key.task_id, key.mode, key.seed, key.mode == "scene_graph" or key.seed == 0,
                      prompt=f"pick up the bowl ({key.mode})")
        kept.append(evaluation.finish(EpisodeRecord.from_json({**done, "perturbation": key.perturbation})))
    capsys.readouterr()
    paths = evaluation.write_report()
    printed = capsys.readouterr().out.rstrip("\n").splitlines()
    plan = SequentialPlan.stored(evaluation.out)
    assert printed == summary_lines(kept, plan=plan, html=paths["html"]), "\n".join(printed)
    assert printed[-1] == f"report: {paths['html']}" and max(len(line) for line in printed[:-1]) <= WIDTH
    assert not [line for line in printed if line.startswith("|")]  # the wide table stays in table.md
    assert "| all |" in paths["markdown"].read_text()
    assert any(line.startswith("  sg ") and "Holm p" in line for line in printed)
