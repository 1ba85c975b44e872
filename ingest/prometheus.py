"""`PrometheusPull`: rankings read a Prometheus-compatible query API (`--prometheus-url`,
docs/interface.md, Metrics): the metrics the table maps and the call statistics of the Collector's `servicegraph`
connector, Tempo's metrics-generator and span metrics, over the incident window and its history.

A pull asks for whole closed windows only (those ending by `end`; `window_seconds` must be the
graph's) and remembers which it has fetched, so each window enters the graph once however often
incidents are ranked over it: a bounded list of covered ranges, the oldest forgotten first. The
grouped queries (`ingest.promql`: the raw samples of the windows and a look-back) run side by side
and their results enter the graph together, or not at all: a timeout, an HTTP error or an answer
that is not the API's makes the pull answer not ok (logged once per kind of failure until it
answers again), the range stays uncovered, and the ranking goes on with what rca has.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from ingest.prometheus_results import (
    BadAnswer,
    Book,
    Series,
    call_stats,
    decode,
    describe_point_series,
    describe_service_graph,
    describe_span_metrics,
    metric_points,
)
from ingest.promql import build_selectors, duration, mapped_names
from rca.graph.writer import GraphWriter, Overloaded
from rca.ranking.pull import SourceStatus
from rca.telemetry.metric_table import MetricTable

log = logging.getLogger("rca.prometheus")
NAME = "prometheus"
MAX_RANGES = 64  # covered ranges remembered
MAX_WINDOWS = 30  # windows per query: answers stay small, each within the timeout, and count on their own
LOOKBACK_S = 120.0  # before windows no pull just read: a counter's previous sample, at scrapes up to this
_MS = 1_000_000


class _Failure(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


class Covered:
    """Ranges of window indices [first, last) already fetched, merged, at most `limit` kept."""

    def __init__(self, limit: int = MAX_RANGES) -> None:
        self.limit = limit
        self.ranges: list[tuple[int, int]] = []  # sorted, disjoint, not touching

    def gaps(self, first: int, last: int) -> list[tuple[int, int]]:
        """The parts of [first, last) not covered, in order."""
        gaps, at = [], first
        for a, b in self.ranges:
            if b <= at or a >= last:
                continue
            if a > at:
                gaps.append((at, a))
            at = max(at, b)
        if at < last:
            gaps.append((at, last))
        return gaps

    def add(self, first: int, last: int) -> None:
        merged: list[tuple[int, int]] = []
        for a, b in sorted([*self.ranges, (first, last)]):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self.ranges = merged[-self.limit :]


class PrometheusPull:
    """Pulls the mapped metrics and call statistics of closed graph windows into the graph."""

    name = NAME

    def __init__(
        self,
        url: str,
        *,
        writer: GraphWriter,
        table: MetricTable,
        window_seconds: float,
        timeout_s: float,
        client: httpx.Client | None = None,
        lookback_s: float = LOOKBACK_S,
        max_ranges: int = MAX_RANGES,
    ) -> None:
        """`lookback_s`: how far before its windows a pull reads, for counters' previous samples."""
        window_ms = round(window_seconds * 1000)
        if window_ms <= 0 or abs(window_ms - window_seconds * 1000) > 1e-6:
            raise ValueError(f"window_seconds must be a whole number of milliseconds, got {window_seconds}")
        self.url = url.rstrip("/")
        self.writer = writer
        self.window_ns = window_ms * _MS
        self.timeout_s = timeout_s
        self.lookback_ns = round(lookback_s * 1000) * _MS
        self.selectors = build_selectors(table)
        self.points = Book(describe_point_series(mapped_names(table)))
        self.service_graph = Book(describe_service_graph)
        self.span_metrics = Book(describe_span_metrics)
        self._read_until = -1  # the window up to which the books hold every series' last sample
        self.covered = Covered(max_ranges)
        self._client = client if client is not None else httpx.Client(timeout=timeout_s)
        self._owns_client = client is None
        self._pool = ThreadPoolExecutor(max_workers=len(self.selectors), thread_name_prefix="rca-prometheus")
        self._lock = threading.Lock()
        self._logged: set[str] = set()  # kinds of failure logged since the last success

    def pull(self, start_ns: int, end_ns: int) -> SourceStatus:
        """Adds the windows of [start_ns, end_ns) that closed by `end_ns` and no earlier pull
        fetched; never raises for the source's failures."""
        with self._lock:
            gaps = self.covered.gaps(start_ns // self.window_ns, end_ns // self.window_ns)
            windows = points = rows = 0
            for gap_first, gap_last in gaps:
                for first in range(gap_first, gap_last, MAX_WINDOWS):
                    last = min(first + MAX_WINDOWS, gap_last)
                    try:
                        added = self._range(first, last)
                    except _Failure as failure:
                        return self._failed(failure)
                    self.covered.add(first, last)
                    windows, points, rows = windows + last - first, points + added[0], rows + added[1]
            self._logged.clear()
            return SourceStatus(NAME, True, f"{windows} new windows: {points} metric points, {rows} call rows")

    def _range(self, first: int, last: int) -> tuple[int, int]:
        """Fetches windows [first, last) and adds them to the graph; returns the points and rows.
        Where the last pull ended at `first`, the books hold the counters' previous samples;
        elsewhere the query reaches back `lookback_ns` for them."""
        continued = first == self._read_until
        first_ns, last_ns = first * self.window_ns, last * self.window_ns
        at = last_ns - _MS  # the windows' last millisecond; a range selector reaches back inclusively
        reach = duration((last_ns - first_ns + (0 if continued else self.lookback_ns)) // _MS - 1)
        futures = {g: self._pool.submit(self._query, f"{q}[{reach}]", at) for g, q in self.selectors.items()}
        answers = {g: f.result() for g, f in futures.items()}
        older = not continued and last < self._read_until  # the books stay with the newer windows
        points = Book(self.points.describe) if older else self.points
        graph = Book(self.service_graph.describe) if older else self.service_graph
        spans = Book(self.span_metrics.describe) if older else self.span_metrics
        if not continued:  # what the books last saw may be older than what the gap held
            for book in (points, graph, spans):
                book.forget_samples()
        batch = metric_points(points, points.read(answers["metrics"], continued=continued), first_ns)
        graph_samples = graph.read(answers["service_graph"], continued=continued)
        span_samples = spans.read(answers["span_metrics"], continued=continued)
        stats = call_stats((graph, graph_samples), (spans, span_samples), first_ns, self.window_ns)
        try:
            self.writer.submit(batch)  # points first: averaged per window, a repeat would leave them be
            self.writer.submit(stats)
        except Overloaded as exc:
            self._read_until = -1  # the books saw windows the graph did not take: read them afresh
            raise _Failure("overloaded", f"rca's ingest queue is full: {exc}") from None
        if not older:
            self._read_until = last
        return len(batch), len(stats)

    def _query(self, query: str, at_ns: int) -> list[Series]:
        form = {"query": query, "time": f"{at_ns // _MS / 1000:.3f}"}
        try:
            response = self._client.post(f"{self.url}/api/v1/query", data=form, timeout=self.timeout_s)
        except httpx.TimeoutException:
            raise _Failure("timeout", f"no answer from {self.url} within {self.timeout_s:g}s") from None
        except httpx.HTTPError as exc:
            raise _Failure("unreachable", f"cannot query {self.url}: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            try:
                decode(response.content)
                reason = response.reason_phrase
            except BadAnswer as exc:
                reason = str(exc)
            raise _Failure(f"http {response.status_code}", f"{self.url} answered {response.status_code}: {reason}")
        try:
            return decode(response.content)
        except BadAnswer as exc:
            raise _Failure("bad answer", f"{self.url}: {exc}") from None

    def _failed(self, failure: _Failure) -> SourceStatus:
        if failure.kind not in self._logged:
            self._logged.add(failure.kind)
            log.warning("prometheus: %s; rankings go on with what rca has", failure.detail)
        return SourceStatus(NAME, False, failure.detail)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._owns_client:
            self._client.close()
