"""The graph's windows over an interval as dense per-window matrices, for change detection.

`window_series` stacks the keyed tables of consecutive event-time windows into arrays of shape
(rows, windows, columns): one row per node-operation, per caller → callee operation edge and per
node signal, so every later statistic is a vectorised reduction over the window axis. History
before the window of interest is merged into one leading column: it is only ever baseline, and
the cost of every statistic grows with the number of columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.accumulators import EdgeSum, KeyedTable, OpSum, SignalSum
from rca.graph import ServiceGraph

Float3 = npt.NDArray[np.float64]
Float2 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Table:
    """A keyed table over windows: `sums[row, window, column]`; keys sorted ascending."""

    keys: npt.NDArray[np.int64]
    sums: Float3


@dataclass(frozen=True, slots=True)
class WindowSeries:
    """Node-operation, edge and signal tables: an optional merged history column, then one column
    per window from `first`."""

    first: int
    window_ns: int
    history: bool  # whether column 0 is the merged history before `first`
    ops: Table  # key: node-operation id; columns OpSum
    edges: Table  # key: caller node-op << 32 | callee node-op; columns EdgeSum
    signals: Table  # key: node << 8 | Signal; columns SignalSum

    @property
    def windows(self) -> int:
        return int(self.ops.sums.shape[1])

    def start_ns(self, column: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Event time at which each of the given columns starts."""
        return (self.first + column - int(self.history)) * self.window_ns


def _summed(parts: list[tuple[npt.NDArray[np.int64], Float2]], columns: int) -> tuple[npt.NDArray[np.int64], Float2]:
    """Rows of several tables summed by key: (sorted distinct keys, sums)."""
    if len(parts) == 1:
        return parts[0]
    keys: npt.NDArray[np.int64]
    keys, row = np.unique(np.concatenate([k for k, _ in parts]), return_inverse=True)
    values = np.concatenate([v for _, v in parts])
    sums = np.stack([np.bincount(row, values[:, c], keys.shape[0]) for c in range(columns)], axis=1)
    return keys, sums.astype(np.float64, copy=False)


def _stack(tables: list[list[KeyedTable]], columns: int) -> Table:
    """One column per list of tables (summed), keyed by the union of their keys. Built in one
    scatter: after a column's tables are summed, each (key, column) pair occurs once."""
    per_column = []
    for column in tables:
        parts = [(k, v) for k, v, _ in (t.view() for t in column) if k.shape[0]]
        per_column.append(_summed(parts, columns) if parts else (np.zeros(0, np.int64), np.zeros((0, columns))))
    every = np.concatenate([k for k, _ in per_column]) if per_column else np.zeros(0, np.int64)
    keys = np.unique(every)
    flat = np.searchsorted(keys, every) * len(tables) + np.repeat(
        np.arange(len(tables)), [k.shape[0] for k, _ in per_column]
    )
    sums = np.zeros((keys.shape[0] * len(tables), columns))
    if flat.shape[0]:
        sums[flat] = np.concatenate([v for _, v in per_column])
    return Table(keys, sums.reshape(keys.shape[0], len(tables), columns))


def window_series(graph: ServiceGraph, history_ns: int, start_ns: int, end_ns: int) -> WindowSeries:
    """The windows overlapping [start_ns, end_ns), one column each, after one column merging the
    windows of [history_ns, start_ns) if there are any (parents resolved first)."""
    graph.resolve()
    first, last = start_ns // graph.window_ns, max(start_ns, end_ns - 1) // graph.window_ns
    if graph.windows:  # nothing older than retention exists: a long-open incident costs no more
        first = min(max(first, min(graph.windows)), last)
    past = [a for w, a in graph.windows.items() if history_ns // graph.window_ns <= w < first]
    columns = ([past] if past else []) + [[a] if (a := graph.windows.get(w)) else [] for w in range(first, last + 1)]
    return WindowSeries(
        first=first,
        window_ns=graph.window_ns,
        history=bool(past),
        ops=_stack([[a.ops for a in c] for c in columns], len(OpSum)),
        edges=_stack([[a.edges for a in c] for c in columns], len(EdgeSum)),
        signals=_stack([[a.signals for a in c] for c in columns], len(SignalSum)),
    )
