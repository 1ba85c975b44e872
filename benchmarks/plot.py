"""`rca bench --plot`: AC@k per method, overall and per fault type (PNG or SVG by the file name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

METRICS = ("AC@1", "AC@3", "Avg@5")


def plot_report(report: dict[str, Any], breakdown: dict[str, Any], path: Path) -> None:
    methods = list(report["methods"])
    types = sorted({key.split("/", 1)[1] for key in breakdown})
    panels = [("all cases", {m: report["methods"][m] for m in methods})]
    panels += [(t, {m: breakdown[f"{m}/{t}"] for m in methods if f"{m}/{t}" in breakdown}) for t in types]
    columns = min(4, len(panels))
    rows = (len(panels) + columns - 1) // columns
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
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    figure.suptitle(f"rca bench --suite {report['suite']} ({report['cases']} cases)")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
