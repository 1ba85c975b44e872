"""The graph's windows over an interval as dense per-window matrices, for change detection.

`window_series` stacks the keyed tables of consecutive event-time windows into arrays of shape
(rows, windows, columns): one row per node-operation, per caller → callee operation edge and per
node signal, so every later statistic is a vectorised reduction over the window axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.accumulators import EdgeSum, KeyedTable, OpSum, SignalSum
from rca.graph import ServiceGraph

Float3 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Table:
    """A keyed table over windows: `sums[row, window, column]`; keys sorted ascending."""

    keys: npt.NDArray[np.int64]
    sums: Float3


@dataclass(frozen=True, slots=True)
class WindowSeries:
    """Node-operation, edge and signal tables over `windows` consecutive windows from `first`."""

    first: int
    window_ns: int
    ops: Table  # key: node-operation id; columns OpSum
    edges: Table  # key: caller node-op << 32 | callee node-op; columns EdgeSum
    signals: Table  # key: node << 8 | Signal; columns SignalSum

    @property
    def windows(self) -> int:
        return int(self.ops.sums.shape[1])

    def start_ns(self, window: int) -> int:
        return (self.first + window) * self.window_ns


def _stack(tables: list[KeyedTable | None], columns: int) -> Table:
    views = [t.view() if t is not None else None for t in tables]
    keys = np.unique(np.concatenate([v[0] for v in views if v is not None] or [np.zeros(0, np.int64)]))
    sums = np.zeros((keys.shape[0], len(tables), columns))
    for w, view in enumerate(views):
        if view is not None and view[0].shape[0]:
            sums[np.searchsorted(keys, view[0]), w] = view[1]
    return Table(keys, sums)


def window_series(graph: ServiceGraph, start_ns: int, end_ns: int) -> WindowSeries:
    """The windows overlapping [start_ns, end_ns) (parents resolved first); missing windows are zeros."""
    graph.resolve()
    first, last = start_ns // graph.window_ns, max(start_ns, end_ns - 1) // graph.window_ns
    aggregates = [graph.windows.get(w) for w in range(first, last + 1)]
    return WindowSeries(
        first=first,
        window_ns=graph.window_ns,
        ops=_stack([a.ops if a else None for a in aggregates], len(OpSum)),
        edges=_stack([a.edges if a else None for a in aggregates], len(EdgeSum)),
        signals=_stack([a.signals if a else None for a in aggregates], len(SignalSum)),
    )
