"""The benchmark's outputs: the paper's tables (Markdown and CSV), plots, side-by-side images."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sgvla.scene_graph.metrics import BenchmarkScores
from sgvla.scene_graph.ontology import RELATIONS
from sgvla.scene_graph.parse import DROP_REASONS
from sgvla.scene_graph.triplet import Graph

GREEN, RED, GREY = "#1a7f37", "#cf222e", "#6e7781"


@dataclass(frozen=True)
class ModelResult:
    model: str
    prompt: str
    constraint: str
    scores: dict[str, BenchmarkScores]  # camera -> scores of the answered frames (absent: none answered)
    errors: dict[str, int]  # camera -> frames whose query failed (no answer: left out of the scores)
    truncated: dict[str, int] = field(default_factory=dict)  # camera -> answers cut at the token limit
    # camera -> answer entries that were no valid triplet (dropped before scoring), and the answers that had any
    rejected: dict[str, int] = field(default_factory=dict)
    partly_rejected: dict[str, int] = field(default_factory=dict)
    sampled: dict[str, int] = field(default_factory=dict)  # camera -> frames sampled (answered + failed)
    failure: str = ""  # the first failed query's cause
    entries: dict[str, int] = field(default_factory=dict)  # camera -> answer entries examined
    kept: dict[str, int] = field(default_factory=dict)  # camera -> triplets kept
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)  # camera -> reason -> entries dropped

    @property
    def views(self) -> list[str]:
        return sorted(set(self.sampled) | set(self.scores))


def _fmt(x: float) -> str:
    return f"{x:.4f}"


def write_table(out: Path, name: str, header: Sequence[str], rows: Sequence[Sequence]) -> Path:
    """``name.md`` (pipe table) and ``name.csv`` with the same cells."""
    cells = [[_fmt(c) if isinstance(c, float) else str(c) for c in row] for row in rows]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    with (out / f"{name}.csv").open("w", newline="") as f:
        csv.writer(f).writerows([list(header), *cells])
    return out / f"{name}.md"


def _views(results: Sequence[ModelResult], labels: Mapping[str, str]) -> list[str]:
    """The scored cameras, in the order of `labels` (the prompt's described cameras), others after by name."""
    order = list(labels)
    return sorted({cam for r in results for cam in r.views},
                  key=lambda c: (order.index(c) if c in order else len(order), c))


def write_tables(out: Path, results: Sequence[ModelResult], labels: Mapping[str, str] = {}) -> list[Path]:
    """`labels`: each camera's column label (the prompt's `labels`), in the tables' order."""
    views = _views(results, labels)
    paths = [write_table(out, "main", ["Model", *(f"{labels.get(v, v)} mF1" for v in views)],
                         [[r.model, *(r.scores[v].mean_task_f1 if v in r.scores else "n/a" for v in views)]
                          for r in results])]
    # `scored frames` are the answered ones; `failed queries` had no answer (server down, model not loaded,
    # timeout) and are left out of every score.
    header = ["Model", "View", "scored frames", "failed queries (not scored)", "truncated", "rejected entries",
              "answers with rejections", "mean-task F1", "macro F1", "micro F1", "coverage",
              "hallucination", "reversal", "direction consistency", "bowl-swapped frames", "prompt", "constraint"]
    rows = []
    for r in results:
        for v in r.views:
            s = r.scores.get(v)
            metrics = ["n/a"] * 8 if s is None else [
                s.mean_task_f1, s.macro_f1, s.micro.f1, s.coverage, s.hallucination_rate, s.reversal_rate,
                s.direction_consistency, s.swapped_frames]
            rows.append([r.model, labels.get(v, v), 0 if s is None else s.n_frames, r.errors.get(v, 0),
                         r.truncated.get(v, 0), r.rejected.get(v, 0), r.partly_rejected.get(v, 0), *metrics,
                         r.prompt, r.constraint])
    paths.append(write_table(out, "diagnostics", header, rows))
    # What parsing did with the answered frames' entries: kept as triplets, or dropped and why.
    rows = [[r.model, labels.get(v, v), r.sampled.get(v, 0) - r.errors.get(v, 0), r.entries.get(v, 0),
             r.kept.get(v, 0), sum(r.dropped.get(v, {}).values()),
             *(r.dropped.get(v, {}).get(reason, 0) for reason in DROP_REASONS)] for r in results for v in r.views]
    paths.append(write_table(out, "dropped_by_reason", ["Model", "View", "answers", "entries", "kept triplets",
                                                        "dropped", *DROP_REASONS], rows))
    rows = [[r.model, labels.get(v, v), rel, p.f1, p.precision, p.recall, p.tp + p.fn]
            for r in results for v, s in sorted(r.scores.items()) for rel, p in s.per_relation.items()]
    paths.append(write_table(out, "per_relation", ["Model", "View", "relation", "F1", "precision", "recall",
                                                  "reference triplets"], rows))
    objects = sorted({o for r in results for s in r.scores.values() for o in s.per_object_recall})
    rows = [[r.model, labels.get(v, v), *(s.per_object_recall.get(o, "n/a") for o in objects)]
            for r in results for v, s in sorted(r.scores.items())]
    paths.append(write_table(out, "per_object_recall", ["Model", "View", *objects], rows))
    tasks = sorted({t for r in results for s in r.scores.values() for t in s.per_task_f1}, key=str)
    rows = [[r.model, labels.get(v, v), *(s.per_task_f1.get(t, "n/a") for t in tasks)]
            for r in results for v, s in sorted(r.scores.items())]
    paths.append(write_table(out, "per_task", ["Model", "View", *(f"T{t}" for t in tasks)], rows))
    return paths


def _bars(path: Path, title: str, groups: list[str], series: dict[str, list[float]], ylabel: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(groups) * max(1, len(series)) ** 0.5), 3.6))
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        ax.bar(np.arange(len(groups)) + i * width - 0.4 + width / 2, values, width, label=label)
    ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_plots(out: Path, results: Sequence[ModelResult], labels: Mapping[str, str] = {}) -> list[Path]:
    paths = []
    for view in _views(results, labels):
        label = labels.get(view, view)
        series = {r.model: [r.scores[view].per_relation[rel].f1 for rel in RELATIONS]
                  for r in results if view in r.scores}
        if not series:  # no model answered about this view
            continue
        paths.append(_bars(out / f"per_relation_f1_{label}.png", f"Per-relation F1 ({label})",
                           list(RELATIONS), series, "F1"))
        tasks = sorted({t for r in results if view in r.scores for t in r.scores[view].per_task_f1}, key=str)
        series = {r.model: [r.scores[view].per_task_f1.get(t, 0.0) for t in tasks]
                  for r in results if view in r.scores}
        paths.append(_bars(out / f"per_task_f1_{label}.png", f"Per-task F1 ({label})",
                           [f"T{t}" for t in tasks], series, "mean frame F1"))
    return paths


def _lines(ax, title: str, items: list[tuple[str, str]]) -> None:
    ax.axis("off")
    ax.set_title(title, fontsize=9, loc="left")
    step = min(0.05, 0.95 / max(1, len(items)))
    for i, (text, color) in enumerate(items):
        ax.text(0.0, 0.97 - i * step, text, color=color, fontsize=min(7.0, 160 * step), family="monospace",
                va="top", transform=ax.transAxes)


def side_by_side(path: Path, image: np.ndarray, title: str, reference: Graph, shown: Graph, f1: float,
                 swapped: bool) -> Path:
    """Image, ground truth (found green, missed grey) and prediction (correct green, wrong red).

    ``shown`` is the prediction under the instance renaming the score chose (``swapped``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 5), gridspec_kw={"width_ratios": [1, 1.3, 1.3]})
    axes[0].imshow(image)
    axes[0].axis("off")
    axes[0].set_title(title, fontsize=8)
    _lines(axes[1], f"ground truth ({len(reference)})",
           [(f"{s} {r} {o}", GREEN if (s, r, o) in shown else GREY) for s, r, o in reference])
    _lines(axes[2], f"prediction ({len(shown)})  F1 {f1:.3f}" + ("  [instances swapped]" if swapped else ""),
           [(f"{s} {r} {o}", GREEN if (s, r, o) in reference else RED) for s, r, o in shown])
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
