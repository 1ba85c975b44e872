"""Recently seen spans by id, so children can find their parents across batches.

A ring of generations of bounded size: when the newest fills, a new one starts and the oldest
is dropped. A span stays findable for at least `capacity` later spans, which bounds memory
whatever the rate; with g generations of capacity / (g - 1) spans each, the index holds
g / (g - 1) × `capacity` spans at most (two generations would hold twice `capacity`). An absent
id costs a probe of each generation, and of the newer ones only when looked up again `since`.
Each generation is an open-addressing hash table in numpy
arrays (span id, packed entry, duration), at most half full, probed linearly by numba kernels
that run without the GIL, so no per-span Python objects exist. An entry is one packed int
(node-operation, peer node-operation, whether the span failed, window modulo 2^15) and the
span's duration.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import numpy.typing as npt
from numba import njit

from rca.graph.intindex import GOLDEN, Num

_WINDOW_BITS = 15
_ERROR_BITS = 1
_PEER_BITS = 24
_WINDOW_MASK = (1 << _WINDOW_BITS) - 1
_PEER_MASK = (1 << _PEER_BITS) - 1
_PEER_SHIFT = _WINDOW_BITS + _ERROR_BITS
_NODEOP_SHIFT = _PEER_SHIFT + _PEER_BITS
_EMPTY = np.uint64(0)  # span ids are never zero (the builder rejects those spans)


@njit(cache=True, nogil=True)
def _insert(
    table: npt.NDArray[np.uint64],
    entries_at: npt.NDArray[np.int64],
    durations_at: npt.NDArray[np.float32],
    bits: Num,
    ids: npt.NDArray[np.uint64],
    entries: npt.NDArray[np.int64],
    durations: npt.NDArray[np.float32],
) -> Num:
    """Places each id, in order, in its first slot that is free or holds it; returns how many
    slots were newly taken."""
    mask, shift = np.uint64((1 << bits) - 1), np.uint64(64 - bits)
    taken = 0
    for k in range(ids.shape[0]):
        key = ids[k]
        slot = (key * GOLDEN) >> shift
        while table[slot] != _EMPTY and table[slot] != key:
            slot = (slot + np.uint64(1)) & mask
        if table[slot] == _EMPTY:
            table[slot] = key
            taken += 1
        entries_at[slot], durations_at[slot] = entries[k], durations[k]
    return taken


@njit(cache=True, nogil=True)
def _lookup(
    table: npt.NDArray[np.uint64],
    entries_at: npt.NDArray[np.int64],
    durations_at: npt.NDArray[np.float32],
    bits: Num,
    ids: npt.NDArray[np.uint64],
    out: npt.NDArray[np.int64],
    durations: npt.NDArray[np.float32],
) -> None:
    """Fills `out` and `durations` where an id is found; leaves them where it is not."""
    mask, shift = np.uint64((1 << bits) - 1), np.uint64(64 - bits)
    for k in range(ids.shape[0]):
        key = ids[k]
        slot = (key * GOLDEN) >> shift
        while table[slot] != _EMPTY:
            if table[slot] == key:
                out[k], durations[k] = entries_at[slot], durations_at[slot]
                break
            slot = (slot + np.uint64(1)) & mask


class _Table:
    """span id → (packed entry, duration in seconds), at most half full; a later insert of an
    id replaces its entry."""

    def __init__(self, capacity: int) -> None:
        self.bits = max(4, int(2 * capacity - 1).bit_length())
        self.ids = np.zeros(1 << self.bits, np.uint64)
        self.entries = np.zeros(1 << self.bits, np.int64)
        self.durations = np.zeros(1 << self.bits, np.float32)
        self.size = 0

    def insert(
        self, ids: npt.NDArray[np.uint64], entries: npt.NDArray[np.int64], durations: npt.NDArray[np.float32]
    ) -> None:
        self.size += _insert(self.ids, self.entries, self.durations, self.bits, ids, entries, durations)

    def lookup(self, ids: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Entries and durations of `ids`; entry -1 (duration NaN) where absent."""
        out = np.full(ids.shape[0], -1, np.int64)
        durations = np.full(ids.shape[0], np.nan, np.float32)
        _lookup(self.ids, self.entries, self.durations, self.bits, ids, out, durations)
        return out, durations


class SpanIndex:
    """span id → (node-operation id, peer node-operation id or -1, window, failed) and duration."""

    def __init__(self, *, capacity: int = 1_000_000, generations: int = 5) -> None:
        if generations < 2:
            raise ValueError(f"a span index needs at least 2 generations, not {generations}")
        self.capacity = capacity
        self.generation_size = -(-capacity // (generations - 1))
        self._tables = deque([_Table(self.generation_size)], maxlen=generations)  # oldest first
        self._started = 1  # generations started so far

    @property
    def generation(self) -> int:
        """The newest generation's number (from 0). An id looked up in vain while it was the newest
        can only be found in it or in those started since."""
        return self._started - 1

    def insert(
        self,
        span_ids: npt.NDArray[np.uint64],
        nodeops: npt.NDArray[np.int64],
        peers: npt.NDArray[np.int64],
        windows: npt.NDArray[np.int64],
        durations_s: npt.NDArray[np.float64],
        failed: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        seconds = durations_s.astype(np.float32)
        packed = (nodeops << _NODEOP_SHIFT) | ((peers + 1) << _PEER_SHIFT) | (windows & _WINDOW_MASK)
        if failed is not None:
            packed |= failed.astype(np.int64) << _WINDOW_BITS
        start = 0
        while start < span_ids.shape[0]:  # each generation filled to its size, then the next
            room = self.generation_size - self._tables[-1].size
            if room == 0:
                self._tables.append(_Table(self.generation_size))  # the oldest generation goes
                self._started += 1
                continue
            batch = slice(start, start + room)
            self._tables[-1].insert(span_ids[batch], packed[batch], seconds[batch])
            start += room

    def lookup(
        self, span_ids: npt.NDArray[np.uint64], newest_window: int, since: npt.NDArray[np.int32] | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """(n, 4) rows of (nodeop, peer, window, failed 0/1) for ids seen within 2^15 windows of
        `newest_window`, -1 everywhere for unknown ids; and their durations in seconds (NaN).
        `since`: per id, the `generation` of a lookup that did not find it (only that generation
        and newer ones are searched: ids waiting for spans that never come cost one probe a pass);
        updated in place to this lookup's for the ids not found."""
        packed = np.full(span_ids.shape[0], -1, np.int64)
        durations = np.full(span_ids.shape[0], np.nan, np.float32)
        for number, table in zip(range(self.generation, -1, -1), reversed(self._tables), strict=False):
            missing = packed < 0 if since is None else (packed < 0) & (since <= number)
            todo = np.flatnonzero(missing)
            if todo.shape[0] == 0:
                break
            packed[todo], durations[todo] = table.lookup(span_ids[todo])
        found = packed >= 0
        if since is not None:
            since[~found] = self.generation
        out = np.full((packed.shape[0], 4), -1, np.int64)
        p = packed[found]
        out[found, 0] = p >> _NODEOP_SHIFT
        out[found, 1] = ((p >> _PEER_SHIFT) & _PEER_MASK) - 1
        out[found, 2] = newest_window - ((newest_window - p) & _WINDOW_MASK)
        out[found, 3] = (p >> _WINDOW_BITS) & 1
        return out, durations


class SpanMarks:
    """span id → a small non-negative mark, for the spans that carry one (a caller's span marking
    its request urgent or ordinary): a `SpanIndex` whose entries hold the mark."""

    def __init__(self, *, capacity: int) -> None:
        self._index = SpanIndex(capacity=capacity)

    def insert(
        self, span_ids: npt.NDArray[np.uint64], marks: npt.NDArray[np.int64], windows: npt.NDArray[np.int64]
    ) -> None:
        none = np.full(span_ids.shape[0], -1, np.int64)
        self._index.insert(span_ids, marks, none, windows, np.zeros(span_ids.shape[0]))

    def lookup(
        self, span_ids: npt.NDArray[np.uint64], newest_window: int, since: npt.NDArray[np.int32] | None = None
    ) -> npt.NDArray[np.int64]:
        """The marks of `span_ids`, -1 for spans without one (or long gone); `since` as in
        `SpanIndex.lookup` (updated in place)."""
        found: npt.NDArray[np.int64] = self._index.lookup(span_ids, newest_window, since)[0][:, 0]
        return found
