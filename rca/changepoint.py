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
COARSE_STEP = 3  # the screening pass scores every third split
REFINE_ABOVE = 1.5  # rows whose screening statistic reaches this are searched at every split


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


def _best_split(
    sums: tuple[Array, Array, Array, Array],
    splits: npt.NDArray[np.intp],
    direction: int,
    floor: Array | float,
) -> tuple[npt.NDArray[np.intp], Array, Array, Array]:
    """Per row: the best of `splits`, and the baseline mean, observed mean and statistic there.
    `sums` are the cumulative weights, weighted values and squares, and the windows with data."""
    cw, cwy, cwyy, nonzero = sums
    total_w, total_wy, total_wyy = cw[:, -1:], cwy[:, -1:], cwyy[:, -1:]
    wb, wyb, wyyb = cw[:, splits - 1], cwy[:, splits - 1], cwyy[:, splits - 1]
    wa, wya, wyya = total_w - wb, total_wy - wyb, total_wyy - wyyb
    with np.errstate(divide="ignore", invalid="ignore"):
        mb, ma = wyb / wb, wya / wa
        scatter = (wyyb - wyb * mb) + (wyya - wya * ma)
        sigma2 = np.maximum(np.nan_to_num(scatter / np.maximum(nonzero - 2, 1)), floor)
        stat = (ma - mb) / np.sqrt(sigma2 / wb + sigma2 / wa)
    stat = np.where((wb >= MIN_WEIGHT) & (wa >= MIN_WEIGHT) & np.isfinite(stat), stat, 0.0)
    best = np.argmax(stat * direction if direction else np.abs(stat), axis=1)
    pick = np.arange(stat.shape[0])
    return splits[best], np.nan_to_num(mb[pick, best]), np.nan_to_num(ma[pick, best]), stat[pick, best]


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
    sign). `variance_floor` is a per-observation variance, per row or for all. Every row is
    first scored on every `COARSE_STEP`-th split; only rows that shift there are searched at
    every split (most rows of a large graph are healthy)."""
    rows, windows = y.shape
    w = np.where(np.isfinite(y), w, 0.0)
    cw, cwy, cwyy = _segment_sums(y, w)
    sums = (cw, cwy, cwyy, np.count_nonzero(w > 0, axis=1).astype(np.float64)[:, None])
    splits = np.arange(max(first, 1), min(last, windows - 1) + 1)
    if splits.shape[0] == 0:
        zeros = np.zeros(rows)
        return Shift(np.full(rows, max(first, 0), np.int64), zeros, zeros, zeros)
    floor = variance_floor
    if isinstance(floor, np.ndarray):
        floor = np.broadcast_to(floor, (rows, 1))
    onset, baseline, observed, score = _best_split(sums, splits[::COARSE_STEP], direction, floor)
    fine = np.flatnonzero(np.abs(score) >= REFINE_ABOVE)
    if fine.shape[0] and COARSE_STEP > 1:
        f_floor = floor[fine] if isinstance(floor, np.ndarray) else floor
        refined = _best_split((cw[fine], cwy[fine], cwyy[fine], sums[3][fine]), splits, direction, f_floor)
        onset[fine], baseline[fine], observed[fine], score[fine] = refined
    return Shift(onset.astype(np.int64), baseline, observed, score)
