"""Nezha's per-pod metrics (`<day>/metric/<pod>_metric.csv.gz`) as data points, read in place.

One row a minute per pod: each numeric column is a gauge named as its column (`CpuUsageRate(%)`,
`MemoryUsageRate(%)`, ...; the metric table maps the ones that carry a fault), placed on the pod's
service by its `pod` label, as a Collector scraping the pod's metrics would label them. The
front-end summary file (`front_service.csv.gz`) is the alert's view, not a pod's, and is skipped.
"""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

from rca.telemetry.metric_rows import MetricRows
from rca.telemetry.metrics import MetricBatch, MetricKind

METRIC_DIR = "metric"
FRONT = "front_service.csv.gz"
_KEYS = ("Time", "TimeStamp", "PodName")
_NS = 1_000_000_000


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def read_metric_rows(path: Path, rows: MetricRows, first_ns: int, last_ns: int) -> None:
    """Adds the points of one pod's metric file whose time lies in [first_ns, last_ns]."""
    reader = csv.DictReader(io.StringIO(gzip.decompress(path.read_bytes()).decode()))
    for record in reader:
        stamp = _number(record.get("TimeStamp") or "")
        if stamp is None:
            continue
        time_ns = int(stamp) * _NS
        if not first_ns <= time_ns <= last_ns:
            continue
        labels = {"pod": record.get("PodName") or path.name.removesuffix("_metric.csv.gz")}
        for column, text in record.items():
            value = None if column in _KEYS else _number(text or "")
            if value is not None:
                rows.add(column, MetricKind.GAUGE, {}, labels, time_ns, 0, value)


def case_metrics(day_dir: Path, first_ns: int, last_ns: int) -> MetricBatch:
    """Every pod's points of a case's day (`day_dir` holding `metric/`) in [first_ns, last_ns];
    an empty batch where the day has no metric files."""
    rows = MetricRows()
    folder = day_dir / METRIC_DIR
    paths = sorted(folder.glob("*_metric.csv.gz")) if folder.is_dir() else []
    for path in paths:
        if path.name != FRONT:
            read_metric_rows(path, rows, first_ns, last_ns)
    return rows.build().batch
