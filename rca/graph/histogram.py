"""Fixed log-spaced histogram buckets: identical everywhere, so histograms merge by addition."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

# Bucket 0 holds values <= LOW; bucket i > 0 holds (LOW*2^((i-1)/PER_OCTAVE), LOW*2^(i/PER_OCTAVE)].
LOW = 1e-9
PER_OCTAVE = 2
N_BUCKETS = 2 + 80 * PER_OCTAVE  # 1e-9 .. ~1.2e15, enough for seconds, bytes and counts alike


def buckets(values: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """The bucket of each value (NaN and values at or below LOW go to bucket 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.ceil(np.log2(np.maximum(values, LOW) / LOW) * PER_OCTAVE)
    scaled = np.nan_to_num(scaled, nan=0.0)
    result: npt.NDArray[np.intp] = np.clip(scaled, 0, N_BUCKETS - 1).astype(np.intp)
    return result


def upper_bounds() -> npt.NDArray[np.float64]:
    """The upper edge of every bucket."""
    return np.asarray(LOW * 2.0 ** (np.arange(N_BUCKETS) / PER_OCTAVE), np.float64)


def quantile(counts: npt.NDArray[np.integer], q: float) -> float:
    """Approximate q-quantile (upper bucket edge) of a histogram; NaN when empty."""
    total = int(counts.sum())
    if total == 0:
        return float("nan")
    index = int(np.searchsorted(np.cumsum(counts), q * total, side="left"))
    return float(upper_bounds()[min(index, N_BUCKETS - 1)])
