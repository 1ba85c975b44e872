"""Telemetry a ranking fetches for itself: sources rca queries (a Prometheus-compatible API) rather
than receives. Before ranking, the incident layer asks each `TelemetryPull` to bring the graph up to
date over the incident window and its history; a pull that fails leaves the ranking to what rca
has, and says so in the ranking's `sources`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

SPANS = "spans"


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """Whether a source of a ranking's telemetry answered (`detail`: what it gave, or what failed)."""

    name: str
    ok: bool
    detail: str = ""


SPANS_OK = SourceStatus(SPANS, True, "")  # what rca receives is always there


class TelemetryPull(Protocol):
    """Adds what a source holds over [start_ns, end_ns) (event time) to the live graph."""

    @property
    def name(self) -> str: ...

    def pull(self, start_ns: int, end_ns: int) -> SourceStatus: ...
