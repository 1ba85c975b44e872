"""Mergeable window aggregates: keyed rows of sums plus a histogram per row."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt
from numba import njit

from rca.graph.histogram import N_BUCKETS
from rca.graph.intindex import IntIndex

_SERIALS = itertools.count()
# Histogram counts of one window (or of the retention, merged): far below 2^31 at any rate, and
# histograms are most of a window's memory.
HIST_DTYPE = np.int32
_NO_BUCKETS = np.zeros(0, np.intp)


@njit(cache=True, nogil=True)
def _add_rows(
    sums_at: npt.NDArray[np.float64],
    hist_at: npt.NDArray[np.int32],
    rows: npt.NDArray[np.int64],
    sums: npt.NDArray[np.float64],
    buckets: npt.NDArray[np.intp],
    index: npt.NDArray[np.intp],
) -> None:
    """Adds sums row `index[k]` into row `rows[k]`, and one count into its bucket where buckets
    are given."""
    for k in range(rows.shape[0]):
        for c in range(sums.shape[1]):
            sums_at[rows[k], c] += sums[index[k], c]
    if buckets.shape[0]:
        for k in range(rows.shape[0]):
            hist_at[rows[k], buckets[index[k]]] += 1


class KeyedTable:
    """Rows of float sums and a histogram, keyed by int64 (rows in order of first appearance,
    through an `IntIndex`) and grown as keys appear. `serial` names the table for its lifetime and
    `version` counts its changes, so readers can tell whether a table they derived something from
    is still the same."""

    def __init__(self, n_sums: int, *, histogram: bool = True) -> None:
        self.serial = next(_SERIALS)
        self.version = 0
        self._index = IntIndex()
        self.sums = np.zeros((16, n_sums), np.float64)
        self.hist = np.zeros((16, N_BUCKETS if histogram else 0), HIST_DTYPE)

    def __len__(self) -> int:
        return len(self._index)

    def rows(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The row of each key, created for keys not seen before."""
        rows = self._index.ids(keys)
        capacity = self.sums.shape[0]
        if len(self) > capacity:
            grow = max(len(self), 2 * capacity) - capacity
            self.sums = np.concatenate([self.sums, np.zeros((grow, self.sums.shape[1]))])
            self.hist = np.concatenate([self.hist, np.zeros((grow, self.hist.shape[1]), HIST_DTYPE)])
        return rows

    def add(
        self,
        keys: npt.NDArray[np.int64],
        sums: npt.NDArray[np.float64],
        buckets: npt.NDArray[np.intp] | None,
        index: npt.NDArray[np.intp] | None = None,
    ) -> None:
        """Adds one sums row (and one histogram count, when `buckets` is given) per key; with
        `index`, only the rows it names, in its order."""
        if index is None:
            index = np.arange(keys.shape[0])
        if index.shape[0] == 0:
            return
        self.version += 1
        rows = self.rows(keys[index])
        _add_rows(self.sums, self.hist, rows, sums, _NO_BUCKETS if buckets is None else buckets, index)

    def merge(self, other: KeyedTable) -> None:
        """Adds every row of `other` into this table."""
        n = len(other)
        if n == 0:
            return
        self.version += 1
        rows = self.rows(other.view()[0])  # keys of a table are distinct
        self.sums[rows] += other.sums[:n]
        self.hist[rows] += other.hist[:n]

    def view(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int32]]:
        n = len(self)
        return self._index.keys, self.sums[:n], self.hist[:n]

    def nbytes(self) -> int:
        return self._index.nbytes() + self.sums.nbytes + self.hist.nbytes


class OpSum(IntEnum):
    """Columns of the per node-and-operation table."""

    CALLS = 0
    ERRORS = 1
    DURATION = 2  # seconds, summed
    CHILD_DURATION = 3  # seconds direct children cover (the union of their intervals; `child_time`)
    WAIT = 4  # seconds inside sibling NCCL collectives (lockstep wait), summed; self time less both


class EdgeSum(IntEnum):
    """Columns of the per caller-operation → callee-operation table."""

    CALLS = 0  # resolved child spans (in the same node too: the operation's call structure)
    ERRORS = 1
    DURATION = 2
    PEER_CALLS = 3  # client spans naming this callee by peer attributes
    PEER_ERRORS = 4
    PEER_DURATION = 5
    PAIRED = 6  # of those, the ones whose instrumented child span was found
    # parent's duration less the child's, at least 0: for a client call's one child, the network
    # time (a client that gave up before its callee answered, or a skewed clock, says nothing of it)
    GAP = 7
    FAILED_CALLER = 8  # of CALLS, those whose caller span failed (call structure reads successful requests)
    # of CALLS, those that did not fail but outlived their failed caller: a client that gave up
    # waiting (its deadline passed on the callee's time), not a failure of the client's own
    GAVE_UP = 9


class SignalSum(IntEnum):
    COUNT = 0
    SUM = 1
    SUMSQ = 2


class LogSum(IntEnum):
    """Columns of the log tables: per node (or node-operation) and template."""

    RECORDS = 0
    ERRORS = 1  # records of error severity or above


@dataclass(slots=True)
class WindowAggregate:
    """Everything observed in one event-time window; `merge` combines windows or shards."""

    ops: KeyedTable
    edges: KeyedTable
    signals: KeyedTable
    logs: KeyedTable  # key: node << 32 | template; every record of the node
    log_ops: KeyedTable  # key: node-operation << 32 | template; the records joined to their span
    metrics: KeyedTable  # key: node << 16 | measure (`rca.graph.metric_measures`); columns SignalSum

    @staticmethod
    def new() -> WindowAggregate:
        return WindowAggregate(
            KeyedTable(len(OpSum)),
            KeyedTable(len(EdgeSum)),
            KeyedTable(len(SignalSum)),
            KeyedTable(len(LogSum), histogram=False),
            KeyedTable(len(LogSum), histogram=False),
            KeyedTable(len(SignalSum), histogram=False),
        )

    def tables(self) -> tuple[KeyedTable, ...]:
        return (self.ops, self.edges, self.signals, self.logs, self.log_ops, self.metrics)

    def merge(self, other: WindowAggregate) -> None:
        for mine, theirs in zip(self.tables(), other.tables(), strict=True):
            mine.merge(theirs)

    def nbytes(self) -> int:
        return sum(t.nbytes() for t in self.tables())
