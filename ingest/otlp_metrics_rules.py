"""The rules both OTLP metric decoders (protobuf and JSON) share: how each data kind reads, what is
refused and why. Pure functions.

Every point goes through `MetricRows`, which places it (cached per attribute set) and validates
times and values. How the OTLP data kinds read:

- gauge: `GAUGE`. sum: `CUMULATIVE` or `DELTA` by its temporality; a non-monotonic cumulative sum
  (an UpDownCounter) is a level, `GAUGE`; a non-monotonic delta sum stays `DELTA`.
- histogram: `HISTOGRAM_CUMULATIVE`/`HISTOGRAM_DELTA`, value = sum, with count and buckets.
- exponential histogram: the same, its buckets turned into explicit bounds: one bucket up to 0
  holding the zero bucket and every negative bucket, then the positive buckets between the
  edges `base**(offset+i)`, `base = 2**(2**-scale)`; edges past the float range fold into the last.
- summary: a `HISTOGRAM_CUMULATIVE` point of its sum and count (no buckets), and a `GAUGE` point
  `{name}:p95` where it has the 0.95 quantile; its other quantiles are not read.

Staleness markers (flag NO_RECORDED_VALUE: a series ended, as a Collector's prometheus receiver
says after a target went away) are accepted and hold no value: nothing of theirs is kept, and
they are not refused. Refused with a reason: sums and histograms of unspecified temporality,
histograms without a sum, number points without a value, points of a metric without a name.
Attribute values become text as log bodies do (`body_text`): strings as they are, ints in
decimal, doubles as Python's shortest round-trip text (`1.5`, `2.0`), booleans `true`/`false`,
bytes as hex, arrays and maps as compact JSON with sorted keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from rca.telemetry.metric_rows import MetricRows
from rca.telemetry.metric_table import P95_SUFFIX
from rca.telemetry.metrics import MetricKind

DELTA, CUMULATIVE = 1, 2  # AggregationTemporality
NO_RECORDED_VALUE = 1  # DataPointFlags: a staleness marker
MIN_SCALE, MAX_SCALE = -10, 20
SUMMARY_QUANTILE = 0.95
NO_VALUE = "number point without a value (as_double or as_int)"
NO_SUM = "histogram point without a sum"
NO_NAME = "metric without a name"
BAD_TEMPORALITY = "aggregation_temporality must be DELTA or CUMULATIVE"
BAD_SCALE = f"exponential histogram scale must be in [{MIN_SCALE}, {MAX_SCALE}]"
Buckets = tuple[Sequence[float], Sequence[float]]  # explicit bounds, counts
# what the rows of one point share: metric, kind, resource, attributes, time, start
Head = tuple[str, MetricKind, dict[str, str], dict[str, str], int, int]


def sum_kind(temporality: int, monotonic: bool) -> MetricKind | str:
    """How a sum's points read, or why they are refused."""
    if temporality == CUMULATIVE:
        return MetricKind.CUMULATIVE if monotonic else MetricKind.GAUGE
    return MetricKind.DELTA if temporality == DELTA else BAD_TEMPORALITY


def histogram_kind(temporality: int) -> MetricKind | str:
    """How a histogram's points read, or why they are refused."""
    if temporality == CUMULATIVE:
        return MetricKind.HISTOGRAM_CUMULATIVE
    return MetricKind.HISTOGRAM_DELTA if temporality == DELTA else BAD_TEMPORALITY


def exponential_buckets(
    scale: int, zero_count: int, offset: int, positive: Sequence[int], negative: int
) -> tuple[list[float], list[float]]:
    """Explicit (bounds, counts) of an exponential histogram at a valid `scale`: everything at or
    below 0 (the zero bucket and the `negative` total), then the positive buckets."""
    bounds, counts = [0.0], [float(zero_count + negative)]
    if positive:
        with np.errstate(over="ignore"):
            edges = np.exp2(np.arange(offset, offset + len(positive) + 1, dtype=np.float64) * 2.0**-scale)
        bounds += edges.tolist()
        counts += [0.0, *map(float, positive)]
    counts.append(0.0)
    finite = int(np.searchsorted(bounds, np.inf))  # edges only grow: the infinite ones are last
    if finite < len(bounds):
        bounds, counts = bounds[:finite], [*counts[:finite], sum(counts[finite:])]
    return bounds, counts


def add_histogram(rows: MetricRows, head: Head, total: tuple[float, float], buckets: Buckets) -> None:
    """A histogram point: `total` = (sum, count), buckets only where it has them (OTLP allows a
    point with neither bounds nor counts)."""
    bounds, counts = buckets
    has = bool(bounds or counts)
    rows.add(*head, *total, bounds if has else None, counts if has else None)


def add_summary(
    rows: MetricRows, head: Head, total: tuple[float, float], quantiles: Iterable[tuple[float, float]]
) -> None:
    """A summary point: its cumulative (sum, count) as `head` says, and its 0.95 quantile as a
    gauge `{metric}:p95`."""
    rows.add(*head, *total)
    name, _, resource, attributes, time, start = head
    for quantile, value in quantiles:
        if quantile == SUMMARY_QUANTILE:
            rows.add(name + P95_SUFFIX, MetricKind.GAUGE, resource, attributes, time, start, value)
