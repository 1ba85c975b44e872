"""A first ranking before the first alert: `warm_up` ranks a small synthetic service graph once,
so that the compiled kernels a ranking runs (numba's, loaded from its on-disk cache or compiled
there) are ready when the service starts answering, not loaded while the first incident waits.
"""

from __future__ import annotations

from rca.graph.service_graph import ServiceGraph
from rca.ranking.causes import Ranker, Ranking
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.spans import KIND_SERVER, SpanBatch

SECOND = 1_000_000_000
MILLISECOND = 1_000_000
REQUESTS = 900  # one a second: a quarter of an hour of windows, baseline and incident
SLOW_FROM = 600  # the callee's own time grows from here on, and one call in five fails
T0 = 1_000_000_000 * SECOND  # any event time: the graph is the warm-up's own


def warm_up(ranker: Ranker, *, window_seconds: float = 10.0) -> Ranking:
    """Ranks `frontend -> backend` calls whose callee slows down and starts failing."""
    graph = ServiceGraph(window_seconds=window_seconds, retention_seconds=2.0 * REQUESTS)
    graph.add(_requests())
    end = graph.newest_ns + 1
    return ranker.rank(graph, alert_nodes=("frontend",), start_ns=end - 300 * SECOND, end_ns=end)


def _requests() -> SpanBatch:
    builder = SpanBatchBuilder()
    starts = [T0 + i * SECOND for i in range(REQUESTS)]
    own_ms = [5 + (20 if i >= SLOW_FROM else 0) + i % 3 for i in range(REQUESTS)]
    ends = [start + ms * MILLISECOND for start, ms in zip(starts, own_ms, strict=True)]
    traces = [i.to_bytes(16, "big") for i in range(1, REQUESTS + 1)]
    roots = [(2 * i + 1).to_bytes(8, "big") for i in range(REQUESTS)]
    calls = [(2 * i + 2).to_bytes(8, "big") for i in range(REQUESTS)]
    failed = [i >= SLOW_FROM and i % 5 == 0 for i in range(REQUESTS)]
    builder.extend(
        "frontend",
        {},
        traces,
        roots,
        [b""] * REQUESTS,
        ["GET /"] * REQUESTS,
        [KIND_SERVER] * REQUESTS,
        [start - MILLISECOND for start in starts],  # the caller's span wraps its call
        [end + MILLISECOND for end in ends],
        failed,
        [{}] * REQUESTS,
    )
    builder.extend(
        "backend",
        {},
        traces,
        calls,
        roots,
        ["Query"] * REQUESTS,
        [KIND_SERVER] * REQUESTS,
        starts,
        ends,
        failed,
        [{}] * REQUESTS,
    )
    return builder.build().batch
