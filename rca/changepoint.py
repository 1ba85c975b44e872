"""Per-row change points: where a windowed mean shifts, and how far beyond its noise.

Every row is a series of per-window means `y` with weights `w` (observations per window). For
each split `k` (windows before it are the baseline, from it on the observed segment) the shift
is a Welch-style statistic: the difference of the weighted means over its standard error, with
the per-observation variance pooled from how the window means scatter around their segment
means (Var(y_t) = sigma^2 / w_t), floored by what the caller knows of the noise (e.g. binomial
or Poisson variance). The split with the largest statistic in the wanted direction is the row's
onset. All rows at once, with cumulative sums: O(rows x windows).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
MIN_WEIGHT = 3.0  # observations each segment needs before a split counts


@dataclass(frozen=True, slots=True)
class Shift:
    """Per row: onset window, baseline and observed means, and the signed statistic there."""

    onset: npt.NDArray[np.int64]
    baseline: Array
    observed: Array
    score: Array  # 0 where no split had enough observations on both sides


def _segment_sums(y: Array, w: Array) -> tuple[Array, Array, Array]:
    wy = np.where(w > 0, w * y, 0.0)
    wyy = np.where(w > 0, wy * y, 0.0)
    return np.cumsum(w, axis=1), np.cumsum(wy, axis=1), np.cumsum(wyy, axis=1)


def mean_shift(
    y: Array,
    w: Array,
    *,
    first: int,
    last: int,
    direction: int,
    variance_floor: Array | float,
) -> Shift:
    """The strongest shift of each row with its onset in windows [first, last].

    `direction` +1 looks for increases, -1 for decreases, 0 for either (the score keeps its
    sign). `variance_floor` is a per-observation variance, per row or for all."""
    rows, windows = y.shape
    w = np.where(np.isfinite(y), w, 0.0)
    cw, cwy, cwyy = _segment_sums(y, w)
    total_w, total_wy, total_wyy = cw[:, -1:], cwy[:, -1:], cwyy[:, -1:]
    splits = np.arange(max(first, 1), min(last, windows - 1) + 1)
    if splits.shape[0] == 0:
        zeros = np.zeros(rows)
        return Shift(np.full(rows, max(first, 0), np.int64), zeros, zeros, zeros)
    wb, wyb, wyyb = cw[:, splits - 1], cwy[:, splits - 1], cwyy[:, splits - 1]
    wa, wya, wyya = total_w - wb, total_wy - wyb, total_wyy - wyyb
    with np.errstate(divide="ignore", invalid="ignore"):
        mb, ma = wyb / wb, wya / wa
        scatter = (wyyb - wyb * mb) + (wyya - wya * ma)
        nonzero = np.cumsum(w > 0, axis=1)[:, -1:]
        sigma2 = np.maximum(np.nan_to_num(scatter / np.maximum(nonzero - 2, 1)), variance_floor)
        stat = (ma - mb) / np.sqrt(sigma2 / wb + sigma2 / wa)
    valid = (wb >= MIN_WEIGHT) & (wa >= MIN_WEIGHT) & np.isfinite(stat)
    stat = np.where(valid, stat, 0.0)
    oriented = stat * direction if direction else np.abs(stat)
    best = np.argmax(oriented, axis=1)
    pick = np.arange(rows)
    return Shift(
        onset=splits[best].astype(np.int64),
        baseline=np.nan_to_num(mb[pick, best]),
        observed=np.nan_to_num(ma[pick, best]),
        score=stat[pick, best],
    )
