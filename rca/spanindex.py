"""Recently seen spans by id, so children can find their parents across batches.

Two generations of bounded size: when the current one fills, the older is dropped. A span
stays findable for at least `capacity` later spans, which bounds memory whatever the rate.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

MISSING = (-1, -1, -1)


class SpanIndex:
    """span id → (node-operation id, peer node-operation id or -1, window)."""

    def __init__(self, *, capacity: int = 1_000_000) -> None:
        self.capacity = capacity
        self._current: dict[int, tuple[int, int, int]] = {}
        self._previous: dict[int, tuple[int, int, int]] = {}

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
        self._current.update(
            zip(span_ids.tolist(), zip(nodeops.tolist(), peers.tolist(), windows.tolist(), strict=True), strict=True)
        )

    def lookup(self, span_ids: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """(n, 3) rows of (nodeop, peer, window); -1 everywhere for unknown ids."""
        ids = span_ids.tolist()
        get, older = self._current.get, self._previous.get
        found = [get(i) or older(i, MISSING) for i in ids]
        return np.asarray(found, np.int64).reshape(len(ids), 3)
