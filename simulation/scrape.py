"""Scraped series as data points (`MetricRows`), and the interval arithmetic the exporters share.

A target's series have one value per scrape time. Gauges are levels; counters are running
totals since their start time (a process restart starts one again from zero, with the restart
as its new start); histograms are cumulative per-bucket counts and sums, as the Collector's
`prometheus` receiver turns Prometheus' `_bucket`/`_sum`/`_count` series into OTLP points.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rca.telemetry.metric_rows import MetricRows
from rca.telemetry.metrics import MetricBatch, MetricKind
from simulation.exporters import Labels, Target

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def edges(times_ns: I64, interval_s: float) -> I64:
    """The bounds of the intervals each scrape reports on: (previous scrape, this scrape]."""
    result: I64 = np.r_[times_ns[:1] - int(interval_s * 1e9), times_ns].astype(np.int64)
    return result


def overlap_s(begin_ns: I64, end_ns: I64, bounds_ns: I64) -> F64:
    """Seconds of each [begin, end) inside each interval of `bounds_ns`: (rows, intervals)."""
    lo = np.maximum(begin_ns[:, None], bounds_ns[None, :-1])
    hi = np.minimum(end_ns[:, None], bounds_ns[None, 1:])
    result: F64 = np.maximum(hi - lo, 0) / 1e9
    return result


def covering(times_ns: I64, begin_ns: I64, end_ns: I64) -> I64:
    """How many [begin, end) hold each of `times_ns`."""
    started = np.searchsorted(np.sort(begin_ns), times_ns, side="right")
    ended = np.searchsorted(np.sort(end_ns), times_ns, side="right")
    result: I64 = (started - ended).astype(np.int64)
    return result


def by_scrape(times_ns: I64, at_ns: I64, values: F64) -> F64:
    """Running totals at each scrape of `values` that happen at `at_ns`."""
    order = np.argsort(at_ns)
    total = np.r_[0.0, np.cumsum(values[order])]
    result: F64 = total[np.searchsorted(at_ns[order], times_ns, side="right")]
    return result


class Scraped:
    """Collects a case's scraped series; `build` gives the data points."""

    def __init__(self) -> None:
        self._rows = MetricRows()

    def gauge(self, name: str, target: Target, labels: Labels, values: F64) -> None:
        for t, v in zip(target.times_ns.tolist(), values.tolist(), strict=True):
            self._rows.add(name, MetricKind.GAUGE, target.resource, labels, t, 0, v)

    def counter(
        self,
        name: str,
        target: Target,
        labels: Labels,
        totals: F64,
        start_ns: int,
        restart_ns: int | None = None,
        whole: bool = False,
    ) -> None:
        """`totals`: the running total since `start_ns` at each scrape (counted in `whole` units,
        or to the microsecond); a process restart at `restart_ns` counts from zero again, from then."""
        starts = np.full(totals.shape[0], start_ns, np.int64)
        if restart_ns is not None:
            after = target.times_ns >= restart_ns
            totals = np.where(after, totals - np.interp(restart_ns, target.times_ns, totals), totals)
            starts[after] = restart_ns
        totals = np.floor(totals) if whole else np.round(totals, 6)
        for t, s, v in zip(target.times_ns.tolist(), starts.tolist(), totals.tolist(), strict=True):
            self._rows.add(name, MetricKind.CUMULATIVE, target.resource, labels, t, s, v)

    def histogram(
        self,
        name: str,
        target: Target,
        labels: Labels,
        bounds: tuple[float, ...],
        counts: F64,
        sums: F64,
        start_ns: int,
    ) -> None:
        """`counts`: (scrapes, buckets) observations so far per bucket, `sums` their sums."""
        for t, c, s in zip(target.times_ns.tolist(), counts.tolist(), sums.tolist(), strict=True):
            kind = MetricKind.HISTOGRAM_CUMULATIVE
            self._rows.add(name, kind, target.resource, labels, t, start_ns, s, float(sum(c)), bounds, c)

    def build(self) -> MetricBatch:
        return self._rows.build().batch
