"""Counting rows into the graph's event-time windows: each row adds to the `WindowAggregate` of
its window (created on first use), one stable sort per call, whatever the rows' order."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
from numba import njit

from rca.graph.accumulators import EdgeSum, LogSum, OpSum, WindowAggregate
from rca.graph.histogram import buckets
from rca.graph.keys import pair_key

Windows = dict[int, WindowAggregate]  # by window index (event time // window length)
Index = npt.NDArray[np.int64]
Array = npt.NDArray[np.float64]


def by_window(windows: Windows, window: Index) -> Iterator[tuple[WindowAggregate, npt.NDArray[np.intp]]]:
    """Each window's aggregate with the rows in it, in their order (one stable sort)."""
    order = np.argsort(window, kind="stable")
    ordered = window[order]
    bounds = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist(), ordered.shape[0]]
    for begin, end in itertools.pairwise(bounds):
        if begin < end and ordered[begin] >= 0:
            index = int(ordered[begin])
            aggregate = windows.get(index)
            if aggregate is None:
                aggregate = windows[index] = WindowAggregate.new()
            yield aggregate, order[begin:end]


def evict(windows: Windows, oldest_kept: int) -> None:
    for w in [w for w in windows if w < oldest_kept]:
        del windows[w]


def count_ops(windows: Windows, window: Index, nodeop: Index, duration: Array, error: npt.NDArray[np.bool_]) -> None:
    sums = np.zeros((nodeop.shape[0], len(OpSum)))
    sums[:, OpSum.CALLS] = 1.0
    sums[:, OpSum.ERRORS] = error
    sums[:, OpSum.DURATION] = duration
    hist = buckets(duration)
    for aggregate, index in by_window(windows, window):
        aggregate.ops.add(nodeop, sums, hist, index)


def count_edges(
    windows: Windows,
    window: Index,
    caller: Index,
    callee: Index,
    duration: Array,
    error: npt.NDArray[np.bool_],
    *,
    peer: bool = False,
    gap: Array | None = None,
    caller_failed: npt.NDArray[np.bool_] | None = None,
    gave_up: npt.NDArray[np.bool_] | None = None,
) -> None:
    sums = np.zeros((caller.shape[0], len(EdgeSum)))
    base = EdgeSum.PEER_CALLS if peer else EdgeSum.CALLS
    sums[:, base] = 1.0
    sums[:, base + 1] = error
    sums[:, base + 2] = duration
    if gap is not None:
        sums[:, EdgeSum.GAP] = gap
    if caller_failed is not None:
        sums[:, EdgeSum.FAILED_CALLER] = caller_failed
    if gave_up is not None:
        sums[:, EdgeSum.GAVE_UP] = gave_up
    keys = pair_key(caller, callee)
    hist = buckets(duration)
    for aggregate, index in by_window(windows, window):
        aggregate.edges.add(keys, sums, hist, index)


def count_values(windows: Windows, window: Index, keys: Index, values: Array, *, metrics: bool = False) -> None:
    """One observation per row: of a span signal keyed node << 8 | signal, or with
    `metrics` of a metric measure keyed node << 16 | measure."""
    sums = np.stack([np.ones_like(values), values, values * values], axis=1)
    hist = None if metrics else buckets(values)
    for aggregate, index in by_window(windows, window):
        (aggregate.metrics if metrics else aggregate.signals).add(keys, sums, hist, index)


def count_logs(
    windows: Windows, window: Index, keys: Index, error: npt.NDArray[np.bool_], *, per_operation: bool
) -> None:
    sums = np.zeros((keys.shape[0], len(LogSum)))
    sums[:, LogSum.RECORDS] = 1.0
    sums[:, LogSum.ERRORS] = error
    for aggregate, index in by_window(windows, window):
        (aggregate.log_ops if per_operation else aggregate.logs).add(keys, sums, None, index)


@njit(cache=True, nogil=True)
def present(signals: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(row, column) of every value that is not NaN, in row-major order."""
    rows, columns = np.empty(signals.size, np.int64), np.empty(signals.size, np.int64)
    n = 0
    for r in range(signals.shape[0]):
        for c in range(signals.shape[1]):
            if not np.isnan(signals[r, c]):
                rows[n], columns[n] = r, c
                n += 1
    return rows[:n], columns[:n]
