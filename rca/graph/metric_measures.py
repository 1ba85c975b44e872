"""Data points → observations of measures: the values the graph averages per window.

A measure is a mapped metric (`rca.telemetry.metric_table`), or a histogram's p95 (`{name}:p95`). Gauges
read as they are; sums as per-second rates (a delta over its interval; a cumulative total as the
difference to the series' previous point, a drop or a new start time being a reset, counted from
the new start where that lies after the previous point); histograms as the mean of the
interval's observations and their p95, from the bucket counts. Points of metrics the table does
not know are counted by name and go no further.

A node's series read at one time (a scrape's, or an export's points, share their timestamp) are
one observation, their mean (`per_reading`): a host's NUMA nodes or a pod's containers then vary
as one reading from scrape to scrape, and the spread between the series (a busy NUMA node beside
an idle one) is not taken for noise.

The state a cumulative series needs (its last point) is bounded: past `max_series` series it is
dropped at once and counted, and each series then needs one more point for its next rate.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.graph.intindex import IntIndex
from rca.telemetry.metric_table import P95_SUFFIX, MetricTable
from rca.telemetry.metrics import MetricBatch, MetricKind

MAX_SERIES = 200_000
MAX_UNKNOWN_NAMES = 1_000  # unknown metric names listed one by one; the rest count together
OTHER_UNKNOWN = "(other)"
P95 = 0.95
# per kind (a `MetricKind` indexes them): whether its points run since a start, carry buckets
_CUMULATIVE = np.isin(np.arange(len(MetricKind)), [MetricKind.CUMULATIVE, MetricKind.HISTOGRAM_CUMULATIVE])
_HISTOGRAM = np.isin(np.arange(len(MetricKind)), [MetricKind.HISTOGRAM_CUMULATIVE, MetricKind.HISTOGRAM_DELTA])


@dataclass(frozen=True, slots=True)
class Observations:
    """One value of a measure per row; `row` is the batch row it came from (node, placement)."""

    row: npt.NDArray[np.int64]
    measure: npt.NDArray[np.int64]
    value: npt.NDArray[np.float64]


def quantile(bounds: tuple[float, ...], counts: npt.NDArray[np.float64], q: float) -> float:
    """The `q` quantile of bucketed observations (explicit upper `bounds`, one count more than
    bounds, the last unbounded), interpolated linearly inside its bucket as Prometheus does;
    NaN without observations."""
    total = float(counts.sum())
    if total <= 0 or not bounds:
        return float("nan")
    cumulative = np.cumsum(counts)
    k = int(np.searchsorted(cumulative, q * total))
    if k >= len(bounds):
        return float(bounds[-1])
    lower = 0.0 if k == 0 else float(bounds[k - 1])
    lower = min(lower, float(bounds[k]))
    before = 0.0 if k == 0 else float(cumulative[k - 1])
    inside = float(counts[k])
    share = (q * total - before) / inside if inside > 0 else 1.0
    return lower + (float(bounds[k]) - lower) * share


def per_reading(
    keys: npt.NDArray[np.int64], time_ns: npt.NDArray[np.int64], values: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """One observation per key (node and measure) and timestamp, the mean of its values: the
    position of each reading's first row, its key and its value."""
    if keys.shape[0] == 0:
        return np.zeros(0, np.int64), keys, values
    order = np.lexsort((time_ns, keys))
    k, t = keys[order], time_ns[order]
    starts = np.flatnonzero(np.r_[True, (k[1:] != k[:-1]) | (t[1:] != t[:-1])])
    sizes = np.diff(np.r_[starts, k.shape[0]])
    return order[starts], k[starts], np.add.reduceat(values[order], starts) / sizes


class MetricMeasures:
    """Turns data points into observations of the measures `table` maps; interns measures."""

    def __init__(self, table: MetricTable, *, window_seconds: float, max_series: int = MAX_SERIES) -> None:
        self.table = table
        self.window_seconds = window_seconds
        self.max_series = max_series
        self.measures: list[str] = []
        self._measure_ids: dict[str, int] = {}
        self.unknown: Counter[str] = Counter()
        self.series_dropped = 0  # series whose cumulative state was dropped at the cap
        self._new_state()

    def _new_state(self) -> None:
        self._series = IntIndex()
        self._time = np.zeros(0, np.int64)
        self._start = np.zeros(0, np.int64)
        self._value = np.zeros(0)
        self._count = np.zeros(0)
        self._buckets: dict[int, npt.NDArray[np.float64]] = {}

    def measure(self, name: str) -> int:
        index = self._measure_ids.get(name)
        if index is None:
            index = self._measure_ids[name] = len(self.measures)
            self.measures.append(name)
        return index

    def _names(self, batch: MetricBatch) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Per row its measure (-1: unknown metric, counted) and its rule's scale."""
        measure = np.full(len(batch.strings) + 1, -1, np.int64)
        scale = np.ones(len(batch.strings) + 1)
        used = np.bincount(batch.name, minlength=len(batch.strings))
        for s in np.flatnonzero(used).tolist():
            name = batch.strings[s]
            rule = self.table.rule(name)
            if rule is None:
                key = name if name in self.unknown or len(self.unknown) < MAX_UNKNOWN_NAMES else OTHER_UNKNOWN
                self.unknown[key] += int(used[s])
            else:
                measure[s], scale[s] = self.measure(name), rule.scale
        return measure[batch.name], scale[batch.name]

    def observe(self, batch: MetricBatch) -> Observations:
        """The observations of `batch`'s points of known metrics."""
        measure, scale = self._names(batch)
        kind = batch.kind
        value = np.full(len(batch), np.nan)
        count = np.full(len(batch), np.nan)  # a histogram interval's observation count
        gauge = kind == MetricKind.GAUGE
        value[gauge] = batch.value[gauge]
        seconds = (batch.time_ns - batch.start_ns) / 1e9
        span = np.where((batch.start_ns > 0) & (seconds > 0), seconds, self.window_seconds)
        delta = kind == MetricKind.DELTA
        value[delta] = batch.value[delta] / span[delta]
        hist_delta = kind == MetricKind.HISTOGRAM_DELTA
        value[hist_delta], count[hist_delta] = batch.value[hist_delta], batch.count[hist_delta]
        cumulative = np.flatnonzero(_CUMULATIVE[kind] & (measure >= 0))
        p95 = self._cumulative(batch, cumulative, value, count, span)
        histogram = np.flatnonzero(_HISTOGRAM[kind] & (measure >= 0))
        for row in np.flatnonzero(hist_delta & (measure >= 0)).tolist():
            bounds, counts = batch.bucket_bounds[row], batch.bucket_counts[row]
            if bounds is not None and counts is not None:
                p95[row] = quantile(bounds, np.asarray(counts, np.float64), P95)
        is_hist = np.zeros(len(batch), np.bool_)
        is_hist[histogram] = True
        with np.errstate(invalid="ignore", divide="ignore"):
            value[is_hist] = np.where(count[is_hist] > 0, value[is_hist] / count[is_hist], np.nan)
        rows = np.flatnonzero((measure >= 0) & np.isfinite(value))
        p95_rows = np.flatnonzero(is_hist & np.isfinite(p95) & (measure >= 0))
        p95_measure = np.asarray(
            [self.measure(self.measures[int(m)] + P95_SUFFIX) for m in measure[p95_rows].tolist()], np.int64
        )
        return Observations(
            row=np.concatenate([rows, p95_rows]),
            measure=np.concatenate([measure[rows], p95_measure]),
            value=np.concatenate([value[rows] * scale[rows], p95[p95_rows] * scale[p95_rows]]),
        )

    def _cumulative(
        self,
        batch: MetricBatch,
        rows: npt.NDArray[np.int64],
        value: npt.NDArray[np.float64],
        count: npt.NDArray[np.float64],
        span: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float64]:
        """Fills the rates (sums) or interval sums and counts (histograms) of cumulative
        `rows` against each series' previous point; returns the histograms' p95 per row."""
        p95 = np.full(len(batch), np.nan)
        if rows.shape[0] == 0:
            return p95
        ids = self._series.ids(batch.series[rows].view(np.int64))
        self._grow(len(self._series))
        order = np.lexsort((batch.time_ns[rows], ids))
        rows, ids = rows[order], ids[order]
        t, start, v, c = batch.time_ns[rows], batch.start_ns[rows], batch.value[rows], batch.count[rows]
        same = np.r_[False, ids[1:] == ids[:-1]]
        prev = np.r_[0, np.arange(rows.shape[0] - 1)]
        prev_t = np.where(same, t[prev], self._time[ids])
        prev_start = np.where(same, start[prev], self._start[ids])
        prev_v = np.where(same, v[prev], self._value[ids])
        prev_c = np.where(same, c[prev], self._count[ids])
        histogram = _HISTOGRAM[batch.kind[rows]]
        seen = prev_t > 0  # a series' first point has nothing to count from: no rate
        reset = seen & ((start != prev_start) | (v < prev_v) | (histogram & (c < prev_c)))
        continued = seen & (t > prev_t) & ~reset
        # A run we saw begin (its start after our last point) counts from its start; one begun
        # before (a series back after a gap, its counter since an unseen start days ago) would read
        # as its lifetime's mean rate: it only starts the series, like a first point.
        restarted = reset & (start > 0) & (t > start) & (start >= prev_t)
        ok = continued | restarted
        dv = np.where(continued, v - prev_v, v)
        dc = np.where(continued, c - prev_c, c)
        seconds = np.where(continued, (t - prev_t) / 1e9, span[rows])
        at = rows[ok]
        value[at] = np.where(histogram[ok], dv[ok], dv[ok] / seconds[ok])
        count[at] = np.where(histogram[ok], dc[ok], np.nan)
        for k in np.flatnonzero(histogram).tolist():
            p95[rows[k]] = self._histogram_p95(batch, int(rows[k]), int(ids[k]), bool(continued[k]), bool(ok[k]))
        last = np.r_[ids[1:] != ids[:-1], True]
        self._time[ids[last]], self._start[ids[last]] = t[last], start[last]
        self._value[ids[last]], self._count[ids[last]] = v[last], c[last]
        if len(self._series) > self.max_series:
            self.series_dropped += len(self._series)
            self._new_state()
        return p95

    def _histogram_p95(self, batch: MetricBatch, row: int, series: int, continued: bool, ok: bool) -> float:
        bounds, counts = batch.bucket_bounds[row], batch.bucket_counts[row]
        if bounds is None or counts is None:
            return float("nan")
        now = np.asarray(counts, np.float64)
        before = self._buckets.get(series)
        self._buckets[series] = now
        if not ok:
            return float("nan")
        if continued and before is not None and before.shape == now.shape:
            return quantile(bounds, np.maximum(now - before, 0.0), P95)
        return quantile(bounds, now, P95)

    def _grow(self, n: int) -> None:
        if n <= self._time.shape[0]:
            return
        extra = max(n, 2 * self._time.shape[0], 64) - self._time.shape[0]
        self._time = np.r_[self._time, np.zeros(extra, np.int64)]
        self._start = np.r_[self._start, np.zeros(extra, np.int64)]
        self._value = np.r_[self._value, np.zeros(extra)]
        self._count = np.r_[self._count, np.zeros(extra)]
