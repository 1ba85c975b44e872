"""How long a record waits for the span it names: a child for its parent, a log record for its
span, a queue time for its trace's priority mark."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class WaitLimit:
    """A record waits while `windows` event-time windows have not passed since its own, or while
    fewer than `spans` spans have arrived since it began to wait, and never once its window has
    left the `retention` (what it would count on is gone). Event time alone would drop what a
    replay sends service by service (one service's whole history, then its callers'): the first
    service's children would be out of time before their parents came. Arrivals alone would keep a
    quiet system's records whose span never comes (a sampled-out parent) for hours; with both, the
    records waiting are at most those of the last `spans` arrivals within the retention."""

    windows: int
    spans: int
    retention: int

    def waiting(
        self, window: npt.NDArray[np.int64], entered: npt.NDArray[np.int64], newest_window: int, arrived: int
    ) -> npt.NDArray[np.bool_]:
        """Per record (its window, and the spans arrived when it began to wait), whether it still
        waits now that `arrived` spans have, the newest in `newest_window`."""
        recent = (window >= newest_window - self.windows) | (arrived - entered < self.spans)
        waits: npt.NDArray[np.bool_] = recent & (window > newest_window - self.retention)
        return waits
