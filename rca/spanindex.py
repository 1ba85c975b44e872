"""Recently seen spans by id, so children can find their parents across batches.

Two generations of bounded size: when the current one fills, the older is dropped. A span
stays findable for at least `capacity` later spans, which bounds memory whatever the rate.
Each generation is an open-addressing hash table in two numpy arrays (span id, packed entry),
probed linearly and a whole batch at a time, so no per-span Python objects exist. An entry is
one packed int (node-operation, peer node-operation, window modulo 2^16) and the span's duration.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

_WINDOW_BITS = 16
_PEER_BITS = 24
_WINDOW_MASK = (1 << _WINDOW_BITS) - 1
_PEER_MASK = (1 << _PEER_BITS) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_EMPTY = np.uint64(0)  # span ids are never zero (the builder rejects those spans)


class _Table:
    """span id → (packed entry, duration in seconds), at most half full; a later insert of an
    id replaces its entry."""

    def __init__(self, capacity: int) -> None:
        self.bits = max(4, int(2 * capacity - 1).bit_length())
        self.mask = np.uint64((1 << self.bits) - 1)
        self.ids = np.zeros(1 << self.bits, np.uint64)
        self.entries = np.zeros(1 << self.bits, np.int64)
        self.durations = np.zeros(1 << self.bits, np.float32)
        self.size = 0

    def _slots(self, ids: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        return (ids * _GOLDEN) >> np.uint64(64 - self.bits)

    def insert(
        self, ids: npt.NDArray[np.uint64], entries: npt.NDArray[np.int64], durations: npt.NDArray[np.float32]
    ) -> None:
        """Places each id in its first slot that is free or holds it. Claimants of one slot
        are written in order, so the last wins and the others probe on; `size` counts every
        placement (an id repeated within a batch counts twice: it only makes swaps earlier)."""
        slots = self._slots(ids)
        while ids.shape[0]:
            held = self.ids[slots]
            open_ = (held == _EMPTY) | (held == ids)
            self.ids[slots[open_]] = ids[open_]
            self.entries[slots[open_]] = entries[open_]
            self.durations[slots[open_]] = durations[open_]
            placed = open_ & (self.ids[slots] == ids)
            self.size += int(np.count_nonzero(placed & (held == _EMPTY)))
            left = ~placed
            ids, entries, durations = ids[left], entries[left], durations[left]
            slots = (slots[left] + np.uint64(1)) & self.mask

    def lookup(self, ids: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Entries and durations of `ids`; entry -1 (duration NaN) where absent."""
        out = np.full(ids.shape[0], -1, np.int64)
        durations = np.full(ids.shape[0], np.nan, np.float32)
        rows = np.arange(ids.shape[0])
        slots = self._slots(ids)
        while rows.shape[0]:
            held = self.ids[slots]
            same = held == ids
            out[rows[same]] = self.entries[slots[same]]
            durations[rows[same]] = self.durations[slots[same]]
            left = ~same & (held != _EMPTY)
            rows, ids, slots = rows[left], ids[left], (slots[left] + np.uint64(1)) & self.mask
        return out, durations


class SpanIndex:
    """span id → (node-operation id, peer node-operation id or -1, window) and duration."""

    def __init__(self, *, capacity: int = 1_000_000) -> None:
        self.capacity = capacity
        self._current = _Table(capacity)
        self._previous = _Table(1)

    def insert(
        self,
        span_ids: npt.NDArray[np.uint64],
        nodeops: npt.NDArray[np.int64],
        peers: npt.NDArray[np.int64],
        windows: npt.NDArray[np.int64],
        durations_s: npt.NDArray[np.float64],
    ) -> None:
        seconds = durations_s.astype(np.float32)
        packed = (nodeops << (_PEER_BITS + _WINDOW_BITS)) | ((peers + 1) << _WINDOW_BITS) | (windows & _WINDOW_MASK)
        for start in range(0, span_ids.shape[0], self.capacity):
            batch = slice(start, start + self.capacity)
            ids, entries = span_ids[batch], packed[batch]
            if self._current.size + ids.shape[0] > self.capacity:
                self._previous, self._current = self._current, _Table(self.capacity)
            self._current.insert(ids, entries, seconds[batch])

    def lookup(
        self, span_ids: npt.NDArray[np.uint64], newest_window: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """(n, 3) rows of (nodeop, peer, window) for ids seen within 2^16 windows of
        `newest_window`, -1 everywhere for unknown ids; and their durations in seconds (NaN)."""
        packed, durations = self._current.lookup(span_ids)
        older = packed < 0
        if older.any() and self._previous.size:
            packed[older], durations[older] = self._previous.lookup(span_ids[older])
        found = packed >= 0
        out = np.full((packed.shape[0], 3), -1, np.int64)
        p = packed[found]
        out[found, 0] = p >> (_PEER_BITS + _WINDOW_BITS)
        out[found, 1] = ((p >> _WINDOW_BITS) & _PEER_MASK) - 1
        out[found, 2] = newest_window - ((newest_window - p) & _WINDOW_MASK)
        return out, durations
