"""How much of a parent span's time its children cover: the union of their intervals, not the sum.

A handler that calls two services in parallel for 20 ms each waits 20 ms, not 40: summing the
children would leave it no time of its own (or less than none). Each child is credited with the
part of its interval no earlier-starting sibling covered, so a parent's credits add up to the
union of its children's intervals. Children that reach the graph in separate resolutions are
credited separately (their overlap then counts twice, as a sum would).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit


@njit(cache=True, nogil=True)
def _credit(
    parent: npt.NDArray[np.uint64], start: npt.NDArray[np.int64], end: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Over children sorted by (parent, start): what each adds to its parent's union so far."""
    credit = np.zeros(parent.shape[0], np.int64)
    reached = np.int64(0)
    for k in range(parent.shape[0]):
        if k == 0 or parent[k] != parent[k - 1]:
            reached = start[k]
        credit[k] = max(end[k] - max(start[k], reached), 0)
        reached = max(reached, end[k])
    return credit


def covered_credit(
    parent: npt.NDArray[np.uint64], start_ns: npt.NDArray[np.int64], end_ns: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """Per child, in seconds, the time it adds to the union of its siblings' (same `parent`)
    intervals, siblings taken by start time."""
    order = np.lexsort((start_ns, parent))
    credit = _credit(parent[order], start_ns[order], end_ns[order])
    out = np.empty(parent.shape[0])
    out[order] = credit / 1e9
    return out
