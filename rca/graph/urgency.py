"""Which requests are urgent: a priority mark on any span of a request's trace tells whether the
engine's queue time is an urgent request's or an ordinary one's.

vLLM records no request priority. The request's `x-priority` header shows where a service
captures headers (the API gateway, a router) and `gen_ai.request.priority` where a caller sets
it, at any depth above the engine: a trace is one request, so its mark is the trace's. Queue
times wait for their trace's mark (a gateway's span ends, and is exported, after the engine's)
as long as their `WaitLimit` lets them; those whose trace never shows one count as neither.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.graph.columns import Columns
from rca.graph.intindex import GOLDEN
from rca.graph.spanindex import SpanMarks
from rca.graph.waiting import WaitLimit


def _trace_keys(trace_id: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """One nonzero 64-bit key per (high, low) trace id, for the marks' index."""
    with np.errstate(over="ignore"):
        key = trace_id[:, 1] ^ (trace_id[:, 0] * GOLDEN)
    return np.where(key == 0, np.uint64(1), key)


@dataclass(slots=True)
class _Waiting(Columns):
    """Queue times waiting for their trace's mark."""

    trace: npt.NDArray[np.uint64]
    node: npt.NDArray[np.int64]  # where the queue time counts (`names.span_signal_nodes`)
    window: npt.NDArray[np.int64]
    queue_s: npt.NDArray[np.float64]
    since: npt.NDArray[np.int32]  # the marks' index generation when last looked up in vain (0: not yet)
    entered: npt.NDArray[np.int64]  # the spans arrived when it began to wait


@dataclass(frozen=True, slots=True)
class MarkedQueueTimes:
    """Queue times whose trace's mark is known: each one's node, window and urgency."""

    node: npt.NDArray[np.int64]
    window: npt.NDArray[np.int64]
    urgent: npt.NDArray[np.bool_]
    queue_s: npt.NDArray[np.float64]


class RequestUrgency:
    """Trace marks and the queue times waiting for them."""

    def __init__(self, *, capacity: int, limit: WaitLimit) -> None:
        self.limit = limit
        self._marks = SpanMarks(capacity=capacity)
        self._waiting: list[_Waiting] = []

    def add(
        self,
        trace_id: npt.NDArray[np.uint64],
        urgent: npt.NDArray[np.float64],
        queue_s: npt.NDArray[np.float64],
        node: npt.NDArray[np.int64],
        window: npt.NDArray[np.int64],
        arrived: int,
    ) -> None:
        """Spans' marks (`urgent`: 1, 0 or NaN) and queue times, `arrived` spans in; a span with
        both counts its own queue time (`rca.telemetry.conventions`) and lends its mark to none."""
        marked = ~np.isnan(urgent)
        lends = marked & np.isnan(queue_s)
        waits = ~marked & ~np.isnan(queue_s)
        if not (lends.any() or waits.any()):
            return
        trace = _trace_keys(trace_id)
        if lends.any():
            self._marks.insert(trace[lends], urgent[lends].astype(np.int64), window[lends])
        if waits.any():
            n = int(waits.sum())
            fresh, entered = np.zeros(n, np.int32), np.full(n, arrived, np.int64)
            self._waiting.append(_Waiting(trace[waits], node[waits], window[waits], queue_s[waits], fresh, entered))

    def resolve(self, newest_window: int, arrived: int) -> MarkedQueueTimes:
        """The waiting queue times whose trace's mark is known by now (`arrived` spans in); the
        others wait on as long as `limit` lets them."""
        if not self._waiting:
            empty = np.zeros(0, np.int64)
            return MarkedQueueTimes(empty, empty, np.zeros(0, np.bool_), np.zeros(0))
        w = _Waiting.joined(self._waiting)
        mark = self._marks.lookup(w.trace, newest_window, w.since)
        found = mark >= 0
        keep = ~found & self.limit.waiting(w.window, w.entered, newest_window, arrived)
        self._waiting = [w.select(keep)] if keep.any() else []
        return MarkedQueueTimes(w.node[found], w.window[found], mark[found] > 0, w.queue_s[found])
