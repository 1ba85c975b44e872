"""What both OTLP receivers do with a decoded request, in one place: count it, queue it."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rca.ingestion import Ingestor, Overloaded
from rca.spans import DecodeResult


@dataclass(frozen=True, slots=True)
class ExportOutcome:
    """What to tell the client: the spans refused and why (OTLP partial success)."""

    accepted: int
    rejected: int
    message: str


class SpanSink:
    """Hands decoded spans to the ingestor and keeps the receive/reject/drop counts."""

    def __init__(self, ingestor: Ingestor) -> None:
        self.ingestor = ingestor
        self._lock = threading.Lock()
        self.received = 0
        self.rejected: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        self.requests_refused: Counter[str] = Counter()

    @contextmanager
    def admit(self) -> Iterator[None]:
        """A place for one request from decode to ack; `Overloaded` (counted) when none is free."""
        try:
            with self.ingestor.admit():
                yield
        except Overloaded:
            self.refuse("overload")
            raise

    def export(self, result: DecodeResult) -> ExportOutcome:
        """Queues the accepted spans; raises `Overloaded` (nothing kept) when full."""
        accepted = len(result.batch)
        try:
            self.ingestor.submit(result.batch)
        except Overloaded:
            with self._lock:
                self.dropped["overload"] += accepted
            raise
        with self._lock:
            self.received += accepted
            for r in result.rejections:
                self.rejected[r.reason] += r.count
        return ExportOutcome(accepted, result.rejected, result.message)

    def refuse(self, reason: str) -> None:
        """Counts a whole request refused before decoding (malformed, oversize, bad type)."""
        with self._lock:
            self.requests_refused[reason] += 1
