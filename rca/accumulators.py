"""Mergeable window aggregates: keyed rows of sums plus a histogram per row."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from rca.histogram import N_BUCKETS

_SERIALS = itertools.count()
# Histogram counts of one window (or of the retention, merged): far below 2^31 at any rate, and
# histograms are most of a window's memory.
HIST_DTYPE = np.int32


class KeyedTable:
    """Rows of float sums and a histogram, keyed by int64 and grown as keys appear. `serial`
    names the table for its lifetime and `version` counts its changes, so readers can tell
    whether a table they derived something from is still the same."""

    def __init__(self, n_sums: int) -> None:
        self.serial = next(_SERIALS)
        self.version = 0
        self._rows: dict[int, int] = {}
        self.keys = np.zeros(16, np.int64)
        self.sums = np.zeros((16, n_sums), np.float64)
        self.hist = np.zeros((16, N_BUCKETS), HIST_DTYPE)

    def __len__(self) -> int:
        return len(self._rows)

    def _grow(self, need: int) -> None:
        capacity = self.keys.shape[0]
        if need <= capacity:
            return
        new = max(need, capacity * 2)
        self.keys = np.resize(self.keys, new)
        self.sums = np.concatenate([self.sums, np.zeros((new - capacity, self.sums.shape[1]))])
        self.hist = np.concatenate([self.hist, np.zeros((new - capacity, N_BUCKETS), HIST_DTYPE)])

    def rows(self, keys: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """The rows of the distinct keys (created for new keys), and each key's place among them."""
        unique, inverse = np.unique(keys, return_inverse=True)
        table = self._rows
        listed = unique.tolist()
        fresh = [k for k in listed if k not in table]
        if fresh:
            start = len(table)
            self._grow(start + len(fresh))
            for offset, key in enumerate(fresh):
                table[key] = start + offset
            self.keys[start : start + len(fresh)] = fresh
        found = np.fromiter(map(table.__getitem__, listed), np.intp, len(listed))
        return found, inverse

    def add(
        self,
        keys: npt.NDArray[np.int64],
        sums: npt.NDArray[np.float64],
        buckets: npt.NDArray[np.intp] | None,
    ) -> None:
        """Adds one sums row (and one histogram count, when `buckets` is given) per key."""
        if keys.shape[0] == 0:
            return
        self.version += 1
        found, inverse = self.rows(keys)
        n = found.shape[0]
        if n == keys.shape[0]:  # every key distinct: no summing needed
            self.sums[found[inverse]] += sums
            if buckets is not None:
                self.hist[found[inverse], buckets] += 1
            return
        for column in range(sums.shape[1]):
            self.sums[found, column] += np.bincount(inverse, sums[:, column], n)
        if buckets is not None:
            counts = np.bincount(inverse * N_BUCKETS + buckets, minlength=n * N_BUCKETS)
            self.hist[found] += counts.reshape(n, N_BUCKETS)

    def merge(self, other: KeyedTable) -> None:
        """Adds every row of `other` into this table."""
        n = len(other)
        if n == 0:
            return
        self.version += 1
        found, inverse = self.rows(other.keys[:n])
        rows = found[inverse]  # keys of a table are distinct
        self.sums[rows] += other.sums[:n]
        self.hist[rows] += other.hist[:n]

    def view(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int32]]:
        n = len(self)
        return self.keys[:n], self.sums[:n], self.hist[:n]


class OpSum(IntEnum):
    """Columns of the per node-and-operation table."""

    CALLS = 0
    ERRORS = 1
    DURATION = 2  # seconds, summed
    CHILD_DURATION = 3  # seconds of direct children, summed (self time = DURATION - this)


class EdgeSum(IntEnum):
    """Columns of the per caller-operation → callee-operation table."""

    CALLS = 0  # resolved child spans (in the same node too: the operation's call structure)
    ERRORS = 1
    DURATION = 2
    PEER_CALLS = 3  # client spans naming this callee by peer attributes
    PEER_ERRORS = 4
    PEER_DURATION = 5
    PAIRED = 6  # of those, the ones whose instrumented child span was found
    GAP = 7  # parent's duration less the child's: for a client call's one child, the network time


class SignalSum(IntEnum):
    COUNT = 0
    SUM = 1
    SUMSQ = 2


@dataclass(slots=True)
class WindowAggregate:
    """Everything observed in one event-time window; `merge` combines windows or shards."""

    ops: KeyedTable
    edges: KeyedTable
    signals: KeyedTable

    @staticmethod
    def new() -> WindowAggregate:
        return WindowAggregate(KeyedTable(len(OpSum)), KeyedTable(len(EdgeSum)), KeyedTable(len(SignalSum)))

    def merge(self, other: WindowAggregate) -> None:
        self.ops.merge(other.ops)
        self.edges.merge(other.edges)
        self.signals.merge(other.signals)

    def nbytes(self) -> int:
        return sum(t.keys.nbytes + t.sums.nbytes + t.hist.nbytes for t in (self.ops, self.edges, self.signals))
