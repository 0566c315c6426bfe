"""report.html: one run looked at episode by episode, in a file that opens from disk.

A table says how often each arm succeeded; what happened in an episode was, until this page, a line of
episodes.jsonl. The page shows both: first the numbers `sgvla.eval.report` computed for comparisons.csv and
table.csv (handed in as those rows, never computed again here) and its plots, then every matched block (task,
perturbation, seed) with each policy's arms side by side: success, failure class, the progress stages and steps,
the prompt the arm received at its first step with the scene graph's triplets marked and what the policy's token
budget cut off struck through, the grounding decision (`decision_*`), what a control showed (`control_*`), on the
arm the operator's verdicts with their history, and the episode's video when one was recorded.

Self-contained on purpose: a report is copied off clusters and opened from a laptop's disk, often offline, so it
loads nothing from a network. Styles and the filter script are inline, plots are data: URIs, videos are linked by
their path relative to the page (``videos/...``). The filters (task, policy, mode, and the outcome pair of the
treatment against the baseline, e.g. "sg succeeded, std failed") are read from and written to the URL's fragment
(``#outcome=sg_only&policy=expert``), so a filtered view is a link. Every text that comes from a record is escaped.

This module only renders: `sgvla.eval.report.write_report` gathers the rows and writes the file.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from urllib.parse import quote

from sgvla.scene_graph.serialize import triplet_spans

# Record fields the arm's card shows in its own rows; every other `decision_*`/`control_*` key goes to its table.
VERDICT_FIELDS = ("verdict", "verdict_source", "operator_note", "stopped_by", "early_verdict", "verdict_wait_s")


@dataclass
class Page:
    """What the page shows, as `write_report` has it: the records and the rows of table.csv and comparisons.csv."""

    title: str
    records: list[dict]
    table_rows: list[dict]  # table.csv
    comparison_rows: list[dict]  # comparisons.csv
    labels: Mapping[str, str]  # mode -> its short label (std, sg, ...)
    controls: frozenset[str]  # the control modes
    baseline: str
    treatment: str
    run_dir: Path  # where the records' videos/ are
    notes: list[str] = field(default_factory=list)  # the table's notes (infrastructure failures, random weights)
    partial: str = ""  # the partial-run line, "" for a run with every planned episode
    plots: dict[str, Path] = field(default_factory=dict)  # caption -> PNG
    family_rows: list[dict] = field(default_factory=list)  # families.csv (spatially-referring sets)
    family_comparison_rows: list[dict] = field(default_factory=list)  # family_comparisons.csv


def e(x) -> str:
    """Any value as HTML text (quotes too: the same helper fills attributes)."""
    return escape("" if x is None else str(x), quote=True)


def _mode_order(page: Page, mode: str) -> tuple:
    return mode != page.baseline, mode in page.controls, mode


def outcome_pair(arms: Mapping[str, dict], page: Page) -> str:
    """The filter's outcome pair of one policy's arms in a block, named by the modes' labels: `sg_only` (the
    treatment succeeded, the baseline failed), `std_only`, `both` or `neither`; "" where either did not run."""
    if page.baseline not in arms or page.treatment not in arms:
        return ""
    t, b = bool(arms[page.treatment]["success"]), bool(arms[page.baseline]["success"])
    return {(True, False): f"{_label(page, page.treatment)}_only", (False, True): f"{_label(page, page.baseline)}_only",
            (True, True): "both"}.get((t, b), "neither")


def _label(page: Page, mode: str) -> str:
    return page.labels.get(mode, mode)


def cut_offset(record: Mapping, spans: list[tuple[int, int]]) -> int | None:
    """Where the policy's token budget cut the prompt, in characters; None when nothing was cut.

    The record keeps token counts (`prompt_tokens` of `prompt_budget`) and how many triplets survived whole
    (`triplets_kept`), not the cut's character offset: the cut is placed at the budget's share of the prompt,
    held between the end of the last triplet kept and the end of the first one lost, which the record does fix."""
    prompt = record.get("prompt") or ""
    if not record.get("prompt_truncated") or not prompt:
        return None
    tokens, budget = record.get("prompt_tokens"), record.get("prompt_budget")
    at = round(len(prompt) * budget / tokens) if tokens and budget else len(prompt)
    kept = record.get("triplets_kept")
    if kept is not None and spans:
        kept = max(0, min(int(kept), len(spans)))
        low = spans[kept - 1][1] if kept else 0
        high = spans[kept][1] - 1 if kept < len(spans) else len(prompt)
        at = min(max(at, low), high)
    return max(0, min(at, len(prompt)))


def prompt_html(record: Mapping) -> str:
    """The prompt with each triplet in <mark> and what the budget cut off in <s class="cut">."""
    prompt = record.get("prompt") or ""
    spans = triplet_spans(prompt)
    cut = cut_offset(record, spans)
    bounds = sorted({0, len(prompt), *(p for s in spans for p in s), *([] if cut is None else [cut])})
    starts = {a for a, _ in spans}
    ends = {b for _, b in spans}
    out, inside = [], False
    for a, b in zip(bounds, bounds[1:]):
        if a in starts:
            inside = True
        elif a in ends:
            inside = False
        text = e(prompt[a:b])
        if inside:
            text = f'<mark class="triplet">{text}</mark>'
        if cut is not None and a >= cut:
            text = f'<s class="cut">{text}</s>'
        out.append(text)
    return "".join(out)


def _prompt_note(record: Mapping, spans: int) -> str:
    shown = record.get("triplets_in_prompt") or 0
    parts = [f"{shown} triplet(s) of the graph's {record.get('graph_triplets', 0)} in the prompt"] if shown else []
    tokens, budget = record.get("prompt_tokens"), record.get("prompt_budget")
    if tokens is not None:
        parts.append(f"{tokens} tokens" + (f" of a budget of {budget}" if budget is not None else " (no budget)"))
    if record.get("prompt_truncated"):
        kept = record.get("triplets_kept")
        parts.append(f"truncated: {'?' if kept is None else kept} of {spans} triplet(s) kept whole; the struck-through "
                     "end is cut, placed from the token counts (approximate within the first triplet lost)")
    return "; ".join(parts)


def _facts(rows: Iterable[tuple[str, object]]) -> str:
    cells = "".join(f"<tr><th>{e(k)}</th><td>{e(v if not isinstance(v, (dict, list)) else json.dumps(v))}</td></tr>"
                    for k, v in rows)
    return f'<table class="facts">{cells}</table>' if cells else ""


def _video(record: Mapping, page: Page, out_dir: Path) -> str:
    """The episode's video by its path relative to the page (the run's videos/ folder); "" without one."""
    video = record.get("video")
    if not video:
        return ""
    found = [p for p in (Path(video), page.run_dir / "videos" / Path(video).name) if p.is_file()]
    target = found[0] if found else page.run_dir / "videos" / Path(video).name
    href = quote(Path(os.path.relpath(target.resolve(), out_dir.resolve())).as_posix())
    missing = "" if found else ' <span class="missing">(not found)</span>'
    return (f'<video controls preload="none" src="{e(href)}"></video>'
            f'<div><a href="{e(href)}">{e(Path(video).name)}</a>{missing}</div>')


def _verdicts(record: Mapping) -> str:
    """The operator's verdict that stands and every verdict given (records of the physical arm)."""
    if "verdict" not in record:
        return ""
    head = _facts((k.replace("_", " "), record[k]) for k in VERDICT_FIELDS if k in record and record[k] != "")
    history = record.get("verdict_history") or []
    rows = "".join(f'<tr class="{e(h.get("status"))}"><td>{e(h.get("verdict"))}</td><td>{e(h.get("note"))}</td>'
                   f'<td>{e(h.get("source"))}</td><td>{e(h.get("after_s"))}</td><td>{e(h.get("status"))}</td></tr>'
                   for h in history if isinstance(h, Mapping))
    table = (f'<table class="history"><tr><th>verdict</th><th>note</th><th>source</th><th>after (s)</th>'
             f'<th>status</th></tr>{rows}</table>') if rows else ""
    return f'<div class="verdicts"><h5>Operator</h5>{head}{table}</div>'


def arm_html(record: Mapping, page: Page, out_dir: Path) -> str:
    mode = record["mode"]
    ok = bool(record["success"])
    stages = sorted((record.get("stages") or {}).items(), key=lambda kv: kv[1])
    facts = [("steps", f"{record.get('steps')} of {record.get('max_steps')}")]
    if record.get("progress") is not None:
        facts.append(("progress", record["progress"]))
    if stages:
        facts.append(("stages", ", ".join(f"{s} @{step}" for s, step in stages)))
    if not ok:
        facts += [("failure class", record.get("failure_class") or "not classified"),
                  ("failure", record.get("failure_reason") or "")]
    if record.get("perturbation_applied"):
        facts.append(("perturbation", record["perturbation_applied"]))
    decision = [(k[len("decision_"):], v) for k, v in sorted(record.items()) if k.startswith("decision_")]
    control = [(k[len("control_"):], v) for k, v in sorted(record.items()) if k.startswith("control_")]
    spans = len(triplet_spans(record.get("prompt") or ""))
    note = _prompt_note(record, spans)
    label = page.labels.get(mode, mode) + (" (control)" if mode in page.controls else "")
    return (f'<article class="arm {"ok" if ok else "fail"}" data-mode="{e(mode)}" data-success="{int(ok)}">'
            f'<h4>{e(label)} <span class="verdict">{"succeeded" if ok else "failed"}</span></h4>'
            f'{_facts((k, v) for k, v in facts if v != "")}'
            f'<h5>Prompt</h5><pre class="prompt">{prompt_html(record)}</pre>'
            + (f'<p class="note">{e(note)}</p>' if note else "")
            + (f'<h5>Grounding decision</h5>{_facts(decision)}' if decision else "")
            + (f'<h5>What the control showed</h5>{_facts(control)}' if control else "")
            + _verdicts(record) + _video(record, page, out_dir) + "</article>")


def blocks_html(page: Page, out_dir: Path) -> tuple[str, int, int]:
    """(html, blocks, arms): every matched block in plan order (task, perturbation, seed), each policy's arms side by
    side in the report's mode order (the baseline first, the controls last)."""
    blocks: dict[tuple, dict[str, dict[str, dict]]] = {}
    for r in page.records:
        key = (int(r["task_id"]), r["perturbation"], int(r["seed"]))
        blocks.setdefault(key, {}).setdefault(r["policy"], {})[r["mode"]] = r
    out = []
    arms = 0
    for (task, pert, seed), policies in sorted(blocks.items(), key=lambda kv: kv[0]):
        groups = []
        text = next(r.get("task", "") for by_mode in policies.values() for r in by_mode.values())
        for policy, by_mode in sorted(policies.items()):
            pair = outcome_pair(by_mode, page)
            cards = "".join(arm_html(by_mode[m], page, out_dir) for m in sorted(by_mode, key=lambda m: _mode_order(page, m)))
            arms += len(by_mode)
            groups.append(f'<div class="group" data-policy="{e(policy)}" data-outcome="{e(pair)}">'
                          f'<h3>{e(policy)}</h3><div class="arms">{cards}</div></div>')
        out.append(f'<section class="block" data-task="{task}" data-perturbation="{e(pert)}" data-seed="{seed}">'
                   f'<h2>task {task} · {e(pert)} · seed {seed} <small>{e(text)}</small></h2>{"".join(groups)}</section>')
    return "".join(out), len(blocks), arms


def _num(x, digits: int = 1, scale: float = 1.0, sign: bool = False) -> str:
    if x == "" or x is None:
        return ""
    return f"{float(x) * scale:{'+' if sign else ''}.{digits}f}"


def _p(x) -> str:
    return "" if x == "" or x is None else f"{float(x):.2g}"


def comparisons_html(page: Page) -> str:
    """comparisons.csv's rows: each mode against the baseline and the treatment against each control, pooled."""
    if not page.comparison_rows:
        return ""
    head = ("policy", "comparison", "pairs", "T k/n", "R k/n", "only T", "only R", "Δ (pp)", "p", "Holm p",
            "Δ progress [95% CI]", "Wilcoxon p")
    rows = []
    for c in page.comparison_rows:
        n = c["pairs"]
        progress = "" if c["progress_delta"] == "" else (
            f'{_num(c["progress_delta"], 2, sign=True)} [{_num(c["progress_ci95_low"], 2, sign=True)}, '
            f'{_num(c["progress_ci95_high"], 2, sign=True)}] (n={c["progress_pairs"]})')
        name = f'{page.labels.get(c["treatment"], c["treatment"])} vs {page.labels.get(c["reference"], c["reference"])}'
        cells = (c["policy"], name, n, f'{c["treatment_successes"]}/{n}', f'{c["reference_successes"]}/{n}',
                 c["only_treatment"], c["only_reference"], _num(c["delta_pp"], sign=True), _p(c["mcnemar_p"]),
                 f'{_p(c["mcnemar_p_holm"])} ({c["holm_family"]})', progress, _p(c["wilcoxon_p"]))
        rows.append("<tr>" + "".join(f"<td>{e(x)}</td>" for x in cells) + "</tr>")
    return ('<h2>Paired comparisons, all tasks pooled</h2><table class="numbers" id="comparisons"><tr>'
            + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>"
            '<p class="note">Matched by (task, perturbation, seed). p: exact McNemar test; Holm p: adjusted '
            "(Holm-Bonferroni) over the policy's comparisons (their number in brackets); progress: mean paired "
            "difference with a 95% percentile bootstrap interval, two-sided Wilcoxon signed-rank p (not corrected). "
            "The same rows as comparisons.csv.</p>")


def families_html(page: Page) -> str:
    """families.csv and family_comparisons.csv: success per referring family and arm, and the tests within each
    family ("" for a run without a spatially-referring set)."""
    if not page.family_rows:
        return ""
    arms = [(r["perturbation"], r["family"], r["policy"], page.labels.get(r["mode"], r["mode"]),
             f'{r["successes"]}/{r["episodes"]}', _num(r["success_rate"], 1, 100),
             f'[{_num(r["ci95_low"], 1, 100)}, {_num(r["ci95_high"], 1, 100)}]') for r in page.family_rows]
    tests = [(c["perturbation"], c["family"], c["policy"],
              f'{page.labels.get(c["treatment"], c["treatment"])} vs {page.labels.get(c["reference"], c["reference"])}',
              c["pairs"], _num(c["delta_pp"], sign=True), _p(c["mcnemar_p"]),
              f'{_p(c["mcnemar_p_holm"])} ({c["holm_family"]})') for c in page.family_comparison_rows]

    def table(head: tuple, rows: list[tuple]) -> str:
        return ('<table class="numbers"><tr>' + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"
                + "".join("<tr>" + "".join(f"<td>{e(x)}</td>" for x in r) + "</tr>" for r in rows) + "</table>")

    return ('<details open id="families"><summary><h2>Success per referring family</h2></summary>'
            + table(("perturbation", "family", "policy", "mode", "k/n", "%", "95% CI"), arms)
            + table(("perturbation", "family", "policy", "comparison", "pairs", "Δ (pp)", "p", "Holm p"), tests)
            + '<p class="note">The rows of families.csv and family_comparisons.csv: episodes matched by task, '
            "perturbation and seed within a family; Holm over the policy's comparisons in that family.</p></details>")


def table_html(page: Page) -> str:
    """table.csv's rows: success per task (pooled rows "all" first) with 95% Wilson intervals and the tests."""
    head = ("task", "perturbation", "policy", "mode", "k/n", "%", "95% CI", "Δ (pp)", "p", "Holm p", "sequential",
            "infra failed")
    rows = sorted(page.table_rows, key=lambda r: (r["task_id"] != "all", str(r["task_id"]).zfill(6),
                                                  r["perturbation"], r["policy"], _mode_order(page, r["mode"])))
    body = []
    for r in rows:
        seq = r.get("sequential", "")
        if seq and r.get("sequential_at_pair") not in ("", None):
            seq = f'{seq} better (pair {r["sequential_at_pair"]})'
        cells = (r["task_id"], r["perturbation"], r["policy"], page.labels.get(r["mode"], r["mode"]),
                 f'{r["successes"]}/{r["episodes"]}', _num(r["success_rate"], 1, 100),
                 f'[{_num(r["ci95_low"], 1, 100)}, {_num(r["ci95_high"], 1, 100)}]', _num(r["delta_pp"], sign=True),
                 _p(r["mcnemar_p"]), _p(r["mcnemar_p_holm"]), seq, r.get("infra_failed") or "")
        body.append(f'<tr class="{"pooled" if r["task_id"] == "all" else ""}">'
                    + "".join(f"<td>{e(x)}</td>" for x in cells) + "</tr>")
    return ('<details open><summary><h2>Success per task and arm</h2></summary><table class="numbers" id="table"><tr>'
            + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>" + "".join(body) + "</table>"
            '<p class="note">The rows of table.csv. Δ and p against the baseline over matched seeds (exact McNemar, '
            "uncorrected per task; Holm on the pooled rows).</p></details>")


def plots_html(page: Page) -> str:
    imgs = [f'<figure><img alt="{e(caption)}" src="data:image/png;base64,'
            f'{base64.b64encode(path.read_bytes()).decode()}"><figcaption>{e(caption)}</figcaption></figure>'
            for caption, path in page.plots.items() if path.is_file()]
    return f'<div class="plots">{"".join(imgs)}</div>' if imgs else ""


def _options(name: str, values: Iterable[tuple[str, str]]) -> str:
    opts = "".join(f'<option value="{e(v)}">{e(text)}</option>' for v, text in values)
    return f'<label>{e(name)} <select id="f-{e(name)}" data-key="{e(name)}"><option value="">all</option>{opts}</select></label>'


def filters_html(page: Page) -> str:
    tasks = sorted({int(r["task_id"]) for r in page.records})
    policies = sorted({r["policy"] for r in page.records})
    modes = sorted({r["mode"] for r in page.records}, key=lambda m: _mode_order(page, m))
    t, b = page.labels.get(page.treatment, page.treatment), page.labels.get(page.baseline, page.baseline)
    pairs = [(f"{t}_only", f"{t} succeeded, {b} failed"), (f"{b}_only", f"{b} succeeded, {t} failed"),
             ("both", "both succeeded"), ("neither", "both failed")]
    return ('<nav class="filters">' + _options("task", [(str(x), str(x)) for x in tasks])
            + _options("policy", [(p, p) for p in policies])
            + _options("mode", [(m, page.labels.get(m, m)) for m in modes])
            + _options("outcome", pairs)
            + '<span id="shown" data-blocks="" data-arms=""></span></nav>')


STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em;margin:0 0 .3em}h2{font-size:1.15em;margin:1.2em 0 .4em}h2 small{font-weight:normal;color:#555}
h3{font-size:1em;margin:.6em 0 .3em}h4{margin:0 0 .3em;font-size:1em}h5{margin:.5em 0 .2em;font-size:.9em;color:#444}
.partial{background:#fff3cd;border:1px solid #c9a227;padding:.6em 1em;font-weight:bold}
.note{color:#555;font-size:.9em;max-width:70em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
table.numbers td{font-variant-numeric:tabular-nums}tr.pooled{background:#f2f2f2;font-weight:bold}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plots img{max-width:100%}
.filters{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #ccc;display:flex;gap:1em;
flex-wrap:wrap;z-index:1}
.block{border-top:2px solid #888;margin-top:1em}.arms{display:flex;gap:.6em;overflow-x:auto;align-items:flex-start}
.arm{flex:0 0 22em;border:1px solid #bbb;border-radius:4px;padding:.5em;background:#fafafa}
.arm.ok{border-left:5px solid #2e7d32}.arm.fail{border-left:5px solid #c62828}
.arm.ok .verdict{color:#2e7d32}.arm.fail .verdict{color:#c62828}
table.facts th{font-weight:normal;color:#555;white-space:nowrap}table.facts{font-size:.85em;width:100%}
pre.prompt{white-space:pre-wrap;font-size:.8em;background:#fff;border:1px solid #ddd;padding:.3em;margin:0}
mark.triplet{background:#fff59d}s.cut{color:#b71c1c;background:#fde0e0}
video{width:100%}.missing{color:#c62828}tr.refused td,tr.replaced td{color:#888}
"""

# Plain inline JS: the selects filter blocks (task), policy groups (policy, outcome pair) and arms (mode); the
# choice lives in the URL's fragment, so a filtered view is a link and --dump-dom of `report.html#outcome=...`
# renders it.
SCRIPT = """
(function(){
  var selects = Array.prototype.slice.call(document.querySelectorAll('.filters select'));
  function read(){
    var want = {};
    location.hash.replace(/^#/, '').split('&').forEach(function(kv){
      var i = kv.indexOf('=');
      if (i > 0) want[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
    });
    selects.forEach(function(s){ s.value = want[s.dataset.key] || ''; });  // an unknown value selects nothing: all
  }
  function apply(){
    var f = {}, blocks = 0, arms = 0;
    selects.forEach(function(s){ f[s.dataset.key] = s.value; });
    document.querySelectorAll('section.block').forEach(function(b){
      var inBlock = 0;
      b.querySelectorAll('.group').forEach(function(g){
        var shown = 0;
        g.querySelectorAll('.arm').forEach(function(a){
          a.hidden = !!f.mode && a.dataset.mode !== f.mode;
          if (!a.hidden) shown++;
        });
        g.hidden = !shown || (!!f.policy && g.dataset.policy !== f.policy) ||
                   (!!f.outcome && g.dataset.outcome !== f.outcome);
        if (!g.hidden) inBlock += shown;
      });
      b.hidden = !inBlock || (!!f.task && b.dataset.task !== f.task);
      if (!b.hidden) { blocks++; arms += inBlock; }
    });
    var out = document.getElementById('shown');
    out.dataset.blocks = blocks;
    out.dataset.arms = arms;
    out.textContent = 'showing ' + blocks + ' of ' + document.querySelectorAll('section.block').length +
                      ' blocks, ' + arms + ' arms';
  }
  function write(){
    var parts = selects.filter(function(s){ return s.value; }).map(function(s){
      return encodeURIComponent(s.dataset.key) + '=' + encodeURIComponent(s.value); });
    history.replaceState(null, '', parts.length ? '#' + parts.join('&') : location.pathname);
    apply();
  }
  selects.forEach(function(s){ s.addEventListener('change', write); });
  window.addEventListener('hashchange', function(){ read(); apply(); });
  read(); apply();
})();
"""


def render(page: Page, out_dir: Path) -> str:
    """The whole page; `out_dir` is the folder it is written to (videos are linked relative to it)."""
    blocks, n_blocks, n_arms = blocks_html(page, Path(out_dir))
    policies = sorted({r["policy"] for r in page.records})
    modes = sorted({r["mode"] for r in page.records}, key=lambda m: _mode_order(page, m))
    summary = (f"{len(page.records)} episode(s) in {n_blocks} matched block(s) (task, perturbation, seed); "
               f"policies: {', '.join(policies)}; modes: {', '.join(page.labels.get(m, m) for m in modes)}")
    notes = "".join(f'<p class="note">{e(n)}</p>' for n in page.notes if n)
    partial = f'<p class="partial" id="partial">{e(page.partial)}</p>' if page.partial else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{e(page.title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{e(page.title)}</h1>{partial}<p>{e(summary)}</p>{notes}"
            f"{comparisons_html(page)}{families_html(page)}{plots_html(page)}{table_html(page)}"
            f'<h2>Matched blocks</h2>{filters_html(page)}<main id="blocks" data-blocks="{n_blocks}" '
            f'data-arms="{n_arms}">{blocks}</main><script>{SCRIPT}</script></body></html>\n')
