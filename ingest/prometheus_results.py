"""Raw samples from Prometheus (`ingest.promql`) into what the graph takes: data points of the
mapped metrics (`MetricBatch`) and call statistics (`CallStats`).

A gauge's samples go in as they are (the graph averages them per window). A counter's increase
since its previous sample (a drop is a reset: the new value is the increase) counts at the later
sample: as a per-second rate for the mapped metrics (a gauge under the counter's name), as calls
and seconds for the call statistics; a histogram's `_sum` and `_count` give the mean observation
between samples. Points carry the series' labels as attributes: `rca.telemetry.metrics.place` finds their node.

The `Book` of a query remembers each series by its labels as Prometheus wrote them (what the series
is, worked out once) and its last sample: a pull that continues the last one needs no look-back
for the counters' previous samples, so answers stay small at thousands of series.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt

from ingest.promql import SERVICE_GRAPH, SPAN_METRICS, MappedName, SampleRole
from rca.graph.call_stats import CallStats
from rca.telemetry.metrics import PLACED_GPU, PLACED_HOST, PLACED_SERVICE, MetricBatch, MetricKind, place

USER_CLIENT = "user"  # Tempo's and the Collector's client of requests no instrumented caller sent
FIELDS = ("calls", "failed", "server_seconds", "client_seconds")  # CallStats' columns, in order
NAME = "__name__"
MAX_SERIES = 200_000  # series a book remembers; past it, it starts again
_U64 = (1 << 64) - 1
_MS = 1_000_000
T = TypeVar("T")


class Series(msgspec.Struct):
    metric: msgspec.Raw  # the labels as written: the series' identity, decoded once
    values: list[tuple[float, str]] = []


class Data(msgspec.Struct, rename={"result_type": "resultType"}):
    result_type: str
    result: list[Series]


class Answer(msgspec.Struct, rename={"error_type": "errorType"}):
    status: str
    data: Data | None = None
    error_type: str = ""
    error: str = ""


_decoder = msgspec.json.Decoder(Answer)
_labels = msgspec.json.Decoder(dict[str, str])


class BadAnswer(ValueError):
    """An answer that is not a Prometheus API matrix (or says the query failed)."""


def decode(body: bytes) -> list[Series]:
    """The series of an answer holding a matrix; raises `BadAnswer`."""
    try:
        answer = _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise BadAnswer(f"not a Prometheus API answer: {exc}") from None
    if answer.status != "success" or answer.data is None:
        raise BadAnswer(f"query failed: {answer.error_type} {answer.error}".strip())
    if answer.data.result_type != "matrix":
        raise BadAnswer(f"expected a matrix, got {answer.data.result_type}")
    return answer.data.result


@dataclass(frozen=True, slots=True)
class Samples:
    """The samples of an answer laid end to end (each series in time order): `slot` is each
    sample's series in the book; `increase` its counter increase since the series' previous
    sample, over `seconds`, where `has_previous`."""

    slot: npt.NDArray[np.int64]
    time_ns: npt.NDArray[np.int64]
    value: npt.NDArray[np.float64]
    increase: npt.NDArray[np.float64]
    seconds: npt.NDArray[np.float64]
    has_previous: npt.NDArray[np.bool_]


class Book(Generic[T]):
    """Series by their labels: what each is (`describe`: None for series to leave out) and its
    last sample."""

    def __init__(self, describe: Callable[[dict[str, str]], T | None]) -> None:
        self.describe = describe
        self._slots: dict[bytes, int] = {}
        self.info: list[T | None] = []
        self.last_ns = np.zeros(0, np.int64)  # 0: none known
        self.last_value = np.zeros(0)

    def forget_samples(self) -> None:
        self.last_ns[:] = 0

    def _slot(self, raw: bytes) -> int:
        slot = self._slots.get(raw)
        if slot is None:
            slot = self._slots[raw] = len(self.info)
            self.info.append(self.describe(_labels.decode(raw)))
        return slot

    def read(self, series: Sequence[Series], *, continued: bool) -> Samples:
        """The samples of `series`; with `continued`, a series' first sample follows its last
        one in the book. Every series' last sample is remembered."""
        if len(self._slots) + len(series) > MAX_SERIES:  # start again (and without previous samples)
            self._slots.clear()
            self.info.clear()
            self.last_ns, self.last_value, continued = np.zeros(0, np.int64), np.zeros(0), False
        slots = np.asarray([self._slot(bytes(s.metric)) for s in series], np.int64)
        if self.last_ns.shape[0] < len(self.info):
            grow = max(len(self.info), 2 * self.last_ns.shape[0], 64) - self.last_ns.shape[0]
            self.last_ns = np.r_[self.last_ns, np.zeros(grow, np.int64)]
            self.last_value = np.r_[self.last_value, np.zeros(grow)]
        lengths = np.asarray([len(s.values) for s in series], np.int64)
        pairs = [v for s in series for v in s.values]
        time_ns = np.rint(np.asarray([t for t, _ in pairs], np.float64) * 1000).astype(np.int64) * _MS
        value = np.asarray([v for _, v in pairs], np.float64) if pairs else np.zeros(0)
        slot = np.repeat(slots, lengths)
        first = np.r_[True, slot[1:] != slot[:-1]] if pairs else np.zeros(0, np.bool_)
        before = np.r_[np.nan, value[:-1]] if pairs else value
        before_ns = np.r_[0, time_ns[:-1]] if pairs else time_ns
        if continued:
            before = np.where(first, self.last_value[slot], before)
            before_ns = np.where(first, self.last_ns[slot], before_ns)
        else:
            before_ns = np.where(first, 0, before_ns)
        increase = np.where(value < before, value, value - before)  # a drop: the counter restarted
        seconds = (time_ns - before_ns) / 1e9
        has = (before_ns > 0) & (before_ns < time_ns) & np.isfinite(increase)
        last = np.r_[first[1:], True] if pairs else first  # each series' last sample
        self.last_ns[slot[last]], self.last_value[slot[last]] = time_ns[last], value[last]
        return Samples(slot, time_ns, value, increase, seconds, has)


@dataclass(frozen=True, slots=True)
class PointSeries:
    """A mapped metric's series: the table's metric, its role, where it belongs, its identity
    (the same for a histogram's `_sum` and `_count`)."""

    metric: str
    role: SampleRole
    node: str
    owner: str | None
    pod: str | None
    placement: int
    identity: int


def describe_point_series(names: Mapping[str, MappedName]) -> Callable[[dict[str, str]], PointSeries | None]:
    def describe(labels: dict[str, str]) -> PointSeries | None:
        mapped = names.get(labels.pop(NAME, ""))
        if mapped is None:
            return None
        p = place(mapped.metric, {}, labels)
        where = PLACED_GPU if p.gpu else PLACED_HOST if p.host else PLACED_SERVICE
        identity = hash((mapped.metric, tuple(sorted(labels.items())))) & _U64
        return PointSeries(mapped.metric, mapped.role, p.node, p.owner, p.pod, where, identity)

    return describe


def metric_points(book: Book[PointSeries], s: Samples, first_ns: int) -> MetricBatch:
    """Gauge points of the mapped metrics' samples from `first_ns` on."""
    info = book.info
    strings: dict[str, int] = {}
    used = np.unique(s.slot).tolist()
    columns = np.full((len(info), 7), -1, np.int64)  # name, node, owner, placement, identity, role, pod
    for k in used:
        x = info[k]
        if x is not None:
            owner = -1 if x.owner is None else strings.setdefault(x.owner, len(strings))
            pod = -1 if x.pod is None else strings.setdefault(x.pod, len(strings))
            name, node = strings.setdefault(x.metric, len(strings)), strings.setdefault(x.node, len(strings))
            columns[k] = (name, node, owner, x.placement, np.uint64(x.identity).view(np.int64), x.role, pod)
    role = columns[s.slot, 5]
    inside = (s.time_ns >= first_ns) & (role >= 0)
    rate = np.divide(s.increase, s.seconds, out=np.full(s.value.shape, np.nan), where=s.has_previous)
    value = np.where(role == SampleRole.COUNTER, rate, s.value)
    rows = [np.flatnonzero(inside & ((role == SampleRole.GAUGE) | (role == SampleRole.COUNTER)))]
    values = [value[rows[0]]]
    count_rows, means = _histogram_means(columns, s, inside)
    rows.append(count_rows)
    values.append(means)
    row, value = np.concatenate(rows), np.concatenate(values)
    finite = np.isfinite(value)
    row, value = row[finite], value[finite]
    at = columns[s.slot[row]]
    n = int(row.shape[0])
    return MetricBatch(
        time_ns=s.time_ns[row],
        start_ns=np.zeros(n, np.int64),
        series=at[:, 4].copy().view(np.uint64),
        name=at[:, 0].astype(np.int32),
        node=at[:, 1].astype(np.int32),
        owner=at[:, 2].astype(np.int32),
        pod=at[:, 6].astype(np.int32),
        placement=at[:, 3].astype(np.int8),
        kind=np.full(n, MetricKind.GAUGE, np.int8),
        value=value,
        count=np.zeros(n),
        bucket_bounds=(None,) * n,
        bucket_counts=(None,) * n,
        strings=tuple(strings),
    )


def _histogram_means(
    columns: npt.NDArray[np.int64], s: Samples, inside: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Rows of the `_count` samples with a `_sum` sample of the same series and time, and the
    mean observation between samples."""
    role, identity = columns[s.slot, 5], columns[s.slot, 4]
    counts = np.flatnonzero((role == SampleRole.HISTOGRAM_COUNT) & inside & s.has_previous & (s.increase > 0))
    sums = np.flatnonzero((role == SampleRole.HISTOGRAM_SUM) & s.has_previous)
    if counts.shape[0] == 0 or sums.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    by = {(i, t): r for i, t, r in zip(identity[sums].tolist(), s.time_ns[sums].tolist(), sums.tolist(), strict=True)}
    found = [by.get(k, -1) for k in zip(identity[counts].tolist(), s.time_ns[counts].tolist(), strict=True)]
    matched = np.asarray(found, np.int64)
    rows = counts[matched >= 0]
    return rows, s.increase[matched[matched >= 0]] / s.increase[rows]


@dataclass(frozen=True, slots=True)
class CallSeries:
    """A call statistics series: its client ("" for none), server, CallStats column, whether it
    is span metrics' and counts error calls."""

    client: str
    server: str
    field: int
    span_metrics: bool = False
    errors: bool = False


def describe_service_graph(labels: dict[str, str]) -> CallSeries | None:
    column, server = SERVICE_GRAPH.get(labels.get(NAME, "")), labels.get("server", "")
    if column is None or not server:
        return None
    client = labels.get("client", "")
    return CallSeries("" if client == USER_CLIENT else client, server, FIELDS.index(column))


def describe_span_metrics(labels: dict[str, str]) -> CallSeries | None:
    column, service = SPAN_METRICS.get(labels.get(NAME, "")), labels.get("service_name", "")
    if column is None or not service:
        return None
    errors = column == "calls" and labels.get("status_code", "").upper().endswith("ERROR")
    return CallSeries("", service, FIELDS.index(column), span_metrics=True, errors=errors)


def call_stats(
    graph: tuple[Book[CallSeries], Samples], spans: tuple[Book[CallSeries], Samples], first_ns: int, window_ns: int
) -> CallStats:
    """Per window from `first_ns` and client → server pair, the counters' increases: the
    servicegraph series' and, for the services none of them names as server, span metrics'
    (an error call counts as a call and as a failed one)."""
    strings: dict[str, int] = {}
    parts = []  # per book: each sample's client, server, field and failed field (-1: none), and the rows used
    for book, s in (graph, spans):
        columns = np.full((len(book.info), 4), -1, np.int64)
        for k in np.unique(s.slot).tolist():
            x = book.info[k]
            if x is not None:
                by = strings.setdefault(x.client, len(strings)) if x.client else -1
                to = strings.setdefault(x.server, len(strings))
                columns[k] = (by, to, x.field, FIELDS.index("failed") if x.errors else -1)
        at = columns[s.slot]
        parts.append((at, np.flatnonzero(s.has_previous & (s.time_ns >= first_ns) & (at[:, 1] >= 0)), s))
    servers = np.unique(parts[0][0][:, 1])
    rows = []
    for k, (at, use, s) in enumerate(parts):
        if k == 1:  # span metrics: for the services no servicegraph series names as server
            use = use[~np.isin(at[use, 1], servers)]
        failed = use[at[use, 3] >= 0]
        rows.append((at[use, 0], at[use, 1], at[use, 2], s.increase[use], s.time_ns[use]))
        rows.append((at[failed, 0], at[failed, 1], at[failed, 3], s.increase[failed], s.time_ns[failed]))
    client, server, field, increase, time_ns = (np.concatenate(c) for c in zip(*rows, strict=True))
    return _stats(client, server, field, increase, time_ns, window_ns, tuple(strings))


def _stats(
    client: npt.NDArray[np.int64],
    server: npt.NDArray[np.int64],
    field: npt.NDArray[np.int64],
    increase: npt.NDArray[np.float64],
    time_ns: npt.NDArray[np.int64],
    window_ns: int,
    strings: tuple[str, ...],
) -> CallStats:
    """Increases summed by window, client and server."""
    if increase.shape[0] == 0:
        none, empty = np.zeros(0, np.int32), np.zeros(0)
        return CallStats(np.zeros(0, np.int64), none, none, empty, empty, empty, empty, ())
    window = time_ns // window_ns
    low, n = int(window.min()), len(strings) + 1
    width = int(window.max()) - low + 1
    key = ((client + 1) * n + server) * width + (window - low)
    keys, row = np.unique(key, return_inverse=True)
    sums = np.zeros((keys.shape[0], len(FIELDS)))
    np.add.at(sums, (row, field), increase)
    pair = keys // width
    return CallStats(
        window_ns=(keys % width + low) * window_ns,
        client=(pair // n - 1).astype(np.int32),
        server=(pair % n).astype(np.int32),
        calls=sums[:, 0],
        failed=sums[:, 1],
        server_seconds=sums[:, 2],
        client_seconds=sums[:, 3],
        strings=strings,
    )
