"""What both OTLP receivers do with a decoded request, in one place: count it, queue it.

Spans, log records and data points are counted apart (`counts()`, `log_counts()`,
`metric_counts()`); requests refused before decoding are counted together, by reason.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from rca.graph.writer import GraphWriter, Overloaded
from rca.telemetry.logs import LogDecodeResult
from rca.telemetry.metrics import MetricDecodeResult
from rca.telemetry.spans import DecodeResult


@dataclass(frozen=True, slots=True)
class ExportOutcome:
    """What to tell the client: the spans refused and why (OTLP partial success)."""

    accepted: int
    rejected: int
    message: str


@dataclass(frozen=True, slots=True)
class SinkCounts:
    """The running totals of a `SpanSink` for one kind of record, read together."""

    received: int
    rejected: Mapping[str, int]
    dropped: Mapping[str, int]
    requests_refused: Mapping[str, int]


class SpanSink:
    """Hands decoded spans to the writer and keeps the receive/reject/drop counts;
    `decode_seconds`, when given, is told how long each request took from admission to decoded."""

    def __init__(self, writer: GraphWriter, *, decode_seconds: Callable[[float], None] | None = None) -> None:
        self.writer = writer
        self._lock = threading.Lock()
        self.received = 0
        self.rejected: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        self.requests_refused: Counter[str] = Counter()
        self.logs_received = 0
        self.logs_rejected: Counter[str] = Counter()
        self.logs_dropped: Counter[str] = Counter()
        self.points_received = 0
        self.points_rejected: Counter[str] = Counter()
        self.points_dropped: Counter[str] = Counter()
        self._decode_seconds = decode_seconds
        self._admitted = threading.local()  # perf_counter at admission, per receiver thread

    @contextmanager
    def admit(self) -> Iterator[None]:
        """A place for one request from decode to ack; `Overloaded` (counted) when none is free."""
        try:
            with self.writer.admit():
                self._admitted.at = time.perf_counter()
                try:
                    yield
                finally:
                    self._admitted.at = None
        except Overloaded:
            self.refuse("overload")
            raise

    def export(self, result: DecodeResult) -> ExportOutcome:
        """Queues the accepted spans; raises `Overloaded` (nothing kept) when full."""
        return self._export(result, self.rejected, self.dropped)

    def export_logs(self, result: LogDecodeResult) -> ExportOutcome:
        """Queues the accepted log records; raises `Overloaded` (nothing kept) when full."""
        return self._export(result, self.logs_rejected, self.logs_dropped, kind="logs")

    def export_metrics(self, result: MetricDecodeResult) -> ExportOutcome:
        """Queues the accepted data points; raises `Overloaded` (nothing kept) when full."""
        return self._export(result, self.points_rejected, self.points_dropped, kind="points")

    def _export(
        self,
        result: DecodeResult | LogDecodeResult | MetricDecodeResult,
        rejected: Counter[str],
        dropped: Counter[str],
        *,
        kind: str = "spans",
    ) -> ExportOutcome:
        self._decoded()
        accepted = len(result.batch)
        try:
            self.writer.submit(result.batch)
        except Overloaded:
            with self._lock:
                dropped["overload"] += accepted
            raise
        with self._lock:
            if kind == "logs":
                self.logs_received += accepted
            elif kind == "points":
                self.points_received += accepted
            else:
                self.received += accepted
            for r in result.rejections:
                rejected[r.reason] += r.count
        return ExportOutcome(accepted, result.rejected, result.message)

    def _decoded(self) -> None:
        admitted = getattr(self._admitted, "at", None)
        if self._decode_seconds is not None and admitted is not None:
            self._decode_seconds(time.perf_counter() - admitted)

    def refuse(self, reason: str) -> None:
        """Counts a whole request refused before decoding (malformed, oversize, bad type)."""
        with self._lock:
            self.requests_refused[reason] += 1

    def counts(self) -> SinkCounts:
        """Spans, and the requests of either kind refused."""
        with self._lock:
            return SinkCounts(self.received, dict(self.rejected), dict(self.dropped), dict(self.requests_refused))

    def log_counts(self) -> SinkCounts:
        """Log records, and the requests of either kind refused."""
        with self._lock:
            return SinkCounts(
                self.logs_received, dict(self.logs_rejected), dict(self.logs_dropped), dict(self.requests_refused)
            )

    def metric_counts(self) -> SinkCounts:
        """Data points, and the requests of any kind refused."""
        with self._lock:
            return SinkCounts(
                self.points_received, dict(self.points_rejected), dict(self.points_dropped), dict(self.requests_refused)
            )
