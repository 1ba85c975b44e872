"""Recently seen spans by id, so children can find their parents across batches.

Two generations of bounded size: when the current one fills, the older is dropped. A span
stays findable for at least `capacity` later spans, which bounds memory whatever the rate.
Each entry is one packed int (node-operation, peer node-operation, window modulo 2^16), so the
dictionaries hold no per-span tuples.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

_WINDOW_BITS = 16
_PEER_BITS = 24
_WINDOW_MASK = (1 << _WINDOW_BITS) - 1
_PEER_MASK = (1 << _PEER_BITS) - 1


class SpanIndex:
    """span id → (node-operation id, peer node-operation id or -1, window)."""

    def __init__(self, *, capacity: int = 1_000_000) -> None:
        self.capacity = capacity
        self._current: dict[int, int] = {}
        self._previous: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._current) + len(self._previous)

    def insert(
        self,
        span_ids: npt.NDArray[np.uint64],
        nodeops: npt.NDArray[np.int64],
        peers: npt.NDArray[np.int64],
        windows: npt.NDArray[np.int64],
    ) -> None:
        if len(self._current) + span_ids.shape[0] > self.capacity:
            self._previous, self._current = self._current, {}
        packed = (nodeops << (_PEER_BITS + _WINDOW_BITS)) | ((peers + 1) << _WINDOW_BITS) | (windows & _WINDOW_MASK)
        self._current.update(zip(span_ids.tolist(), packed.tolist(), strict=True))

    def lookup(self, span_ids: npt.NDArray[np.uint64], newest_window: int) -> npt.NDArray[np.int64]:
        """(n, 3) rows of (nodeop, peer, window) for ids seen within 2^16 windows of
        `newest_window`; -1 everywhere for unknown ids."""
        get, older = self._current.get, self._previous.get
        packed = np.asarray([v if (v := get(i, -1)) >= 0 else older(i, -1) for i in span_ids.tolist()], np.int64)
        found = packed >= 0
        out = np.full((packed.shape[0], 3), -1, np.int64)
        p = packed[found]
        out[found, 0] = p >> (_PEER_BITS + _WINDOW_BITS)
        out[found, 1] = ((p >> _WINDOW_BITS) & _PEER_MASK) - 1
        out[found, 2] = newest_window - ((newest_window - p) & _WINDOW_MASK)
        return out
