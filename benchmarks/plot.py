"""`rca bench --plot`: AC@k per method, overall and per fault type, and rca's reliability
diagram (PNG or SVG by the file name)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes

METRICS = ("AC@1", "AC@3", "Avg@5")
RELIABILITY_BINS = 5


@dataclass(frozen=True, slots=True)
class ReliabilityBin:
    """The cases whose top-1 probability lies in [low, high) (the last bin includes 1)."""

    low: float
    high: float
    cases: int
    mean_probability: float
    accuracy: float


def reliability_bins(
    probabilities: Sequence[float], hits: Sequence[bool], bins: int = RELIABILITY_BINS
) -> list[ReliabilityBin]:
    """Cases binned by top-1 probability into `bins` equal-width bins over [0, 1]: per non-empty
    bin its mean probability and its share of hits (a calibrated ranker's lie on the diagonal)."""
    if bins < 1:
        raise ValueError(f"bins must be at least 1, not {bins}")
    if len(probabilities) != len(hits):
        raise ValueError(f"{len(probabilities)} probabilities but {len(hits)} hits")
    bad = [p for p in probabilities if not 0.0 <= p <= 1.0]
    if bad:
        raise ValueError(f"probabilities must lie in [0, 1], not {bad[0]}")
    members: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for p, hit in zip(probabilities, hits, strict=True):
        members[min(math.floor(p * bins), bins - 1)].append((p, hit))
    return [
        ReliabilityBin(
            i / bins,
            (i + 1) / bins,
            len(cases),
            sum(p for p, _ in cases) / len(cases),
            sum(hit for _, hit in cases) / len(cases),
        )
        for i, cases in enumerate(members)
        if cases
    ]


def _reliability_panel(ax: Axes, per_case: Sequence[dict[str, Any]]) -> None:
    """rca's reliability diagram: accuracy against mean top-1 probability per bin, counts annotated."""
    scored = [row for row in per_case if "rca" in row["rank"]]
    bins = reliability_bins([row["probability"] for row in scored], [row["rank"]["rca"] == 1 for row in scored])
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="calibrated")
    ax.plot([b.mean_probability for b in bins], [b.accuracy for b in bins], marker="o", label="rca")
    for b in bins:
        ax.annotate(
            f"n={b.cases}",
            (b.mean_probability, b.accuracy),
            textcoords="offset points",
            xytext=(0, -12),
            ha="center",
            fontsize=7,
        )
    ax.set_title("rca reliability (top-1)", fontsize=9)
    ax.set_xlabel("mean top-1 probability", fontsize=8)
    ax.set_ylabel("AC@1", fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, loc="lower right")


def plot_report(
    report: dict[str, Any], breakdown: dict[str, Any], path: Path, per_case: Sequence[dict[str, Any]] | None = None
) -> None:
    """The bars per method and fault type; with `per_case` rows carrying rca's top-1
    `probability` (`benchmarks.accuracy`), rca's reliability diagram too."""
    methods = list(report["methods"])
    types = sorted({key.split("/", 1)[1] for key in breakdown})
    panels = [("all cases", {m: report["methods"][m] for m in methods})]
    panels += [(t, {m: breakdown[f"{m}/{t}"] for m in methods if f"{m}/{t}" in breakdown}) for t in types]
    reliability = bool(per_case) and any("rca" in row["rank"] for row in per_case or ())
    count = len(panels) + reliability
    columns = min(4, count)
    rows = (count + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3 * rows), squeeze=False)
    width = 0.8 / max(len(methods), 1)
    for ax, (title, scores) in zip(axes.flat, panels, strict=False):
        for i, method in enumerate(methods):
            if method in scores:
                values = [scores[method][k] for k in METRICS]
                ax.bar([x + i * width for x in range(len(METRICS))], values, width, label=method)
        ax.set_title(title, fontsize=9)
        ax.set_xticks([x + width * (len(methods) - 1) / 2 for x in range(len(METRICS))], METRICS)
        ax.set_ylim(0, 1)
    if reliability:
        _reliability_panel(list(axes.flat)[len(panels)], per_case or ())
    for ax in list(axes.flat)[count:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    figure.suptitle(f"rca bench --suite {report['suite']} ({report['cases']} cases)")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
