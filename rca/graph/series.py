"""The graph's windows over an interval as dense per-window matrices, for change detection.

`window_series` stacks the keyed tables of consecutive event-time windows into arrays of shape
(rows, windows, columns): one row per node-operation, per caller → callee operation edge, per
node signal, per node (or node-operation) log template and per node metric measure, so every later statistic is a
vectorised reduction over the window axis. History before the window of interest is merged into
one leading column: it is only ever baseline, and the cost of every statistic grows with the
number of columns.
"""

from __future__ import annotations

import functools
import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from rca.graph.accumulators import EdgeSum, KeyedTable, LogSum, OpSum, SignalSum
from rca.graph.service_graph import ServiceGraph

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
    logs: Table  # key: node << 32 | template; columns LogSum
    log_ops: Table  # key: node-operation << 32 | template; columns LogSum
    metrics: Table  # key: node << 16 | measure; columns SignalSum

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


Identity = tuple[tuple[tuple[int, int], ...], ...]  # per column, (serial, version) of each table


@dataclass(frozen=True, slots=True)
class _Stacked:
    table: Table
    identity: Identity
    present: npt.NDArray[np.bool_]  # [row, column]: the row's key is in that column's tables


class SeriesCache:
    """What the last `window_series` given it stacked. The next call copies every column whose
    tables are unchanged (the same tables at the same versions) and builds only the others: an
    incident ranked again reuses its closed windows and rebuilds the newest."""

    def __init__(self) -> None:
        self.stacked: dict[str, _Stacked] = {}
        self.lock = threading.Lock()  # one call at a time uses and replaces what is kept


def _empty(columns: int) -> tuple[npt.NDArray[np.int64], Float2]:
    return np.zeros(0, np.int64), np.zeros((0, columns))


def _stack(tables: list[list[KeyedTable]], columns: int, previous: _Stacked | None) -> _Stacked:
    """One column per list of tables (summed), keyed by the union of their keys; each column
    built in one scatter (after its tables are summed, each key occurs once), or copied from
    `previous` when its tables are unchanged (left in place in its buffers when nothing else
    holds them, `_unshared`)."""
    identity = tuple(tuple((t.serial, t.version) for t in column) for column in tables)
    if previous is not None and identity == previous.identity:
        return previous
    had = {ident: j for j, ident in enumerate(previous.identity)} if previous else {}
    reused = [(j, had[ident]) for j, ident in enumerate(identity) if ident in had]
    fresh = [j for j, ident in enumerate(identity) if ident not in had]
    built = []
    for j in fresh:
        parts = [(k, v) for k, v, _ in (t.view() for t in tables[j]) if k.shape[0]]
        built.append(_summed(parts, columns) if parts else _empty(columns))
    fresh_keys = np.concatenate([k for k, _ in built]) if built else np.zeros(0, np.int64)
    width = len(tables)
    in_place = moved = same_rows = False
    row: npt.NDArray[np.intp] | None = None  # where each fresh key's row is
    if previous is None or not reused:
        keys, row = np.unique(fresh_keys, return_inverse=True)
    else:
        new_cols, old_cols = (np.asarray(c, np.intp) for c in zip(*reused, strict=True))
        old_rows = np.flatnonzero(previous.present[:, old_cols].any(axis=1))
        keys = _union(previous.table.keys, old_rows, fresh_keys)
        in_place = np.array_equal(new_cols, old_cols)
        moved = not in_place and _run(new_cols) and _run(old_cols)  # the window moved: one block, shifted
        # the same rows too (a key new in a fresh column had its row already; a row only in the
        # columns dropped is zero in those kept): one block, nothing to zero first
        same_rows = (in_place or moved) and np.array_equal(keys, previous.table.keys)
    if in_place and same_rows and previous is not None and width == previous.present.shape[1] and _unshared(previous):
        # nothing handed out earlier still reads the buffers: only the fresh columns are rewritten
        sums, present = previous.table.sums, previous.present
        sums.flags.writeable = True
        sums[:, fresh], present[:, fresh] = 0.0, False
    else:
        # stored column-major (columns, rows, windows): `sums[:, :, c]`, what the evidence reads, is contiguous
        sums = (np.empty if same_rows else np.zeros)((columns, keys.shape[0], width)).transpose(1, 2, 0)
        present = np.zeros((keys.shape[0], width), np.bool_)
        if (in_place or moved) and previous is not None:  # whole rows of windows at once
            if in_place:  # where they were (a column past the old ones is fresh)
                new = old = slice(0, min(width, previous.present.shape[1]))
            else:  # one block, shifted
                new, old = (slice(int(c[0]), int(c[-1]) + 1) for c in (new_cols, old_cols))
            to: Any = slice(None) if same_rows else np.searchsorted(keys, previous.table.keys[old_rows])
            of: Any = slice(None) if same_rows else old_rows
            sums[to, new], present[to, new] = previous.table.sums[of, old], previous.present[of, old]
            sums[:, fresh], present[:, fresh] = 0.0, False
        elif previous is not None and reused:
            new_rows = np.searchsorted(keys, previous.table.keys[old_rows])[:, None]
            sums[new_rows, new_cols] = previous.table.sums[old_rows[:, None], old_cols]
            present[new_rows, new_cols] = previous.present[old_rows[:, None], old_cols]
    if fresh_keys.shape[0]:
        row = np.searchsorted(keys, fresh_keys) if row is None else row
        col = np.repeat(np.asarray(fresh, np.intp), [k.shape[0] for k, _ in built])
        _scatter(sums.transpose(2, 0, 1), present, row, col, np.concatenate([v for _, v in built]))
    sums.flags.writeable = False  # shared with the next call through the cache
    return _Stacked(Table(keys, sums), identity, present)


@njit(cache=True, nogil=True)
def _scatter(
    planes: Float3,
    present: npt.NDArray[np.bool_],
    rows: npt.NDArray[np.intp],
    columns: npt.NDArray[np.intp],
    values: Float2,
) -> None:
    """The fresh windows' sums (`values[i]` to row `rows[i]` of window `columns[i]`) into the
    stacked (sums, rows, windows) planes, taken in row order (a counting sort): each plane is
    written front to back, not a window at a time down every row."""
    n_rows = planes.shape[1]
    start = np.zeros(n_rows + 1, np.int64)
    for i in range(rows.shape[0]):
        start[rows[i] + 1] += 1
    for r in range(n_rows):
        start[r + 1] += start[r]
    order = np.empty(rows.shape[0], np.int64)
    for i in range(rows.shape[0]):
        order[start[rows[i]]] = i
        start[rows[i]] += 1
    for entry in order:
        r, w = rows[entry], columns[entry]
        present[r, w] = True
        for c in range(planes.shape[0]):
            planes[c, r, w] = values[entry, c]


def _run(columns: npt.NDArray[np.intp]) -> bool:
    """Whether `columns` are consecutive, ascending."""
    return bool(np.all(np.diff(columns) == 1))


def _union(
    known: npt.NDArray[np.int64], kept: npt.NDArray[np.intp], fresh: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """The sorted union of `known[kept]` and `fresh`: `known` itself (the same object) when every
    row is kept and no fresh key is new, as while an incident is ranked again and again."""
    if kept.shape[0] == known.shape[0]:
        at = np.minimum(np.searchsorted(known, fresh), max(known.shape[0] - 1, 0))
        if known.shape[0] and np.array_equal(known[at], fresh):
            return known
    return np.union1d(known[kept], fresh)


def _unshared(stacked: _Stacked) -> bool:
    """Whether only the cache still holds `stacked`'s arrays: no series handed out earlier is
    alive (counted by CPython's references: its table, and every view of the buffer through
    `base`), so they may be written in place rather than copied."""
    return _references(stacked) == _held_by_nothing_else()


def _references(stacked: _Stacked) -> tuple[int, int]:
    return sys.getrefcount(stacked.table), sys.getrefcount(stacked.table.sums.base)


@functools.cache
def _held_by_nothing_else() -> tuple[int, int]:
    """What `_references` reads of a stack nothing else holds, on this interpreter (which may
    borrow references it does not count): read off a probe built alike."""
    sums = np.zeros((0, 0, 0)).transpose(1, 2, 0)
    return _references(_Stacked(Table(np.zeros(0, np.int64), sums), (), np.zeros((0, 0), np.bool_)))


def window_series(
    graph: ServiceGraph, history_ns: int, start_ns: int, end_ns: int, cache: SeriesCache | None = None
) -> WindowSeries:
    """The windows overlapping [start_ns, end_ns), one column each, after one column merging the
    windows of [history_ns, start_ns) if there are any (parents resolved first). With `cache`,
    the columns unchanged since its last call are copied rather than built."""
    graph.resolve()
    first, last = start_ns // graph.window_ns, max(start_ns, end_ns - 1) // graph.window_ns
    if graph.windows:  # nothing older than retention exists: a long-open incident costs no more
        first = min(max(first, min(graph.windows)), last)
    past = [a for w, a in graph.windows.items() if history_ns // graph.window_ns <= w < first]
    columns = ([past] if past else []) + [[a] if (a := graph.windows.get(w)) else [] for w in range(first, last + 1)]
    kinds = {
        "ops": ([[a.ops for a in c] for c in columns], len(OpSum)),
        "edges": ([[a.edges for a in c] for c in columns], len(EdgeSum)),
        "signals": ([[a.signals for a in c] for c in columns], len(SignalSum)),
        "logs": ([[a.logs for a in c] for c in columns], len(LogSum)),
        "log_ops": ([[a.log_ops for a in c] for c in columns], len(LogSum)),
        "metrics": ([[a.metrics for a in c] for c in columns], len(SignalSum)),
    }
    if cache is None:
        stacked = {k: _stack(tables, n, None) for k, (tables, n) in kinds.items()}
    else:
        with cache.lock:
            # emptied until every stack is built: a call that fails leaves no buffer half-rewritten
            previous, cache.stacked = cache.stacked, {}
            stacked = {k: _stack(tables, n, previous.get(k)) for k, (tables, n) in kinds.items()}
            cache.stacked = stacked
    return WindowSeries(
        first=first,
        window_ns=graph.window_ns,
        history=bool(past),
        ops=stacked["ops"].table,
        edges=stacked["edges"].table,
        signals=stacked["signals"].table,
        logs=stacked["logs"].table,
        log_ops=stacked["log_ops"].table,
        metrics=stacked["metrics"].table,
    )
