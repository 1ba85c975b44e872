"""Mergeable window aggregates: keyed rows of sums plus a histogram per row."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from rca.histogram import N_BUCKETS

_SERIALS = itertools.count()
# Histogram counts of one window (or of the retention, merged): far below 2^31 at any rate, and
# histograms are most of a window's memory.
HIST_DTYPE = np.int32
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_NO_BUCKETS = np.zeros(0, np.intp)
Num = Any  # a numba integer scalar: numba, not mypy, types the kernels


@njit(cache=True, nogil=True)
def _rows_of(
    slot_keys: npt.NDArray[np.int64],
    slot_rows: npt.NDArray[np.int64],
    row_keys: npt.NDArray[np.int64],
    n_rows: Num,
    keys: npt.NDArray[np.int64],
    rows: npt.NDArray[np.int64],
) -> tuple[Num, Num]:
    """Fills `rows` with each key's row, giving new keys the next rows in order, until the rows
    run out (`row_keys` is full); returns the rows in use and how many keys were placed. The
    slots (a power of two, at least twice the rows) are probed linearly; row -1 marks a free one."""
    mask = np.uint64(slot_keys.shape[0] - 1)
    for k in range(keys.shape[0]):
        key = keys[k]
        mixed = np.uint64(key) * _GOLDEN
        slot = (mixed ^ (mixed >> np.uint64(32))) & mask
        while slot_rows[slot] >= 0 and slot_keys[slot] != key:
            slot = (slot + np.uint64(1)) & mask
        if slot_rows[slot] < 0:
            if n_rows == row_keys.shape[0]:
                return n_rows, k
            slot_keys[slot], slot_rows[slot], row_keys[n_rows] = key, n_rows, key
            n_rows += 1
        rows[k] = slot_rows[slot]
    return n_rows, keys.shape[0]


@njit(cache=True, nogil=True)
def _add_rows(
    sums_at: npt.NDArray[np.float64],
    hist_at: npt.NDArray[np.int32],
    rows: npt.NDArray[np.int64],
    sums: npt.NDArray[np.float64],
    buckets: npt.NDArray[np.intp],
) -> None:
    """Adds each sums row into its row, and one count into its bucket where buckets are given."""
    for k in range(rows.shape[0]):
        for c in range(sums.shape[1]):
            sums_at[rows[k], c] += sums[k, c]
    for k in range(buckets.shape[0]):
        hist_at[rows[k], buckets[k]] += 1


class KeyedTable:
    """Rows of float sums and a histogram, keyed by int64 and grown as keys appear (rows in
    order of first appearance, found through an open-addressing hash table). `serial` names the
    table for its lifetime and `version` counts its changes, so readers can tell whether a table
    they derived something from is still the same."""

    def __init__(self, n_sums: int) -> None:
        self.serial = next(_SERIALS)
        self.version = 0
        self._n = 0
        self.keys = np.zeros(16, np.int64)
        self.sums = np.zeros((16, n_sums), np.float64)
        self.hist = np.zeros((16, N_BUCKETS), HIST_DTYPE)
        self._slot_keys = np.zeros(32, np.int64)
        self._slot_rows = np.full(32, -1, np.int64)

    def __len__(self) -> int:
        return self._n

    def _grow(self) -> None:
        capacity = self.keys.shape[0]
        self.keys = np.resize(self.keys, 2 * capacity)
        self.sums = np.concatenate([self.sums, np.zeros_like(self.sums)])
        self.hist = np.concatenate([self.hist, np.zeros_like(self.hist)])
        self._slot_keys = np.zeros(4 * capacity, np.int64)
        self._slot_rows = np.full(4 * capacity, -1, np.int64)
        keys = self.keys[: self._n].copy()  # distinct: they get back the rows they had
        _rows_of(self._slot_keys, self._slot_rows, self.keys, 0, keys, np.empty(self._n, np.int64))

    def rows(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The row of each key, created for keys not seen before."""
        rows = np.empty(keys.shape[0], np.int64)
        placed = 0
        while True:
            self._n, done = _rows_of(self._slot_keys, self._slot_rows, self.keys, self._n, keys[placed:], rows[placed:])
            placed += done
            if placed == keys.shape[0]:
                return rows
            self._grow()

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
        rows = self.rows(keys)
        _add_rows(self.sums, self.hist, rows, sums, _NO_BUCKETS if buckets is None else buckets)

    def merge(self, other: KeyedTable) -> None:
        """Adds every row of `other` into this table."""
        n = len(other)
        if n == 0:
            return
        self.version += 1
        rows = self.rows(other.keys[:n])  # keys of a table are distinct
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
