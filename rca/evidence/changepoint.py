"""Per-row change points: where a windowed mean shifts, and how far beyond its noise.

Every row is a series of per-window means `y` with weights `w` (observations per window). For
each split `k` (windows before it are the baseline, from it on the observed segment) the shift
is a Welch-style statistic: the difference of the weighted means over its standard error, with
the per-observation variance pooled from how the window means scatter around their segment
means (Var(y_t) = sigma^2 / w_t), floored by what the caller knows of the noise (e.g. binomial
or Poisson variance). The split with the largest statistic in the wanted direction is the row's
onset. One compiled pass over each row's cumulative sums: O(rows x windows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

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


_BIG = float(np.finfo(np.float64).max)


@njit(cache=True, nogil=True)
def _finite(x: float) -> float:
    """numpy's nan_to_num for one value: NaN to 0, infinities to the largest floats."""
    if np.isnan(x):
        return 0.0
    return min(max(x, -_BIG), _BIG)


@njit(cache=True, nogil=True)
def _search(
    cw: Array, cwy: Array, cwyy: Array, nonzero: float, floor: float, splits: Any, direction: int
) -> tuple[int, float, float, float]:
    """The best of `splits` for one row (cumulative weights, weighted values and squares):
    split, baseline mean, observed mean and statistic. Only the statistic is computed per split;
    the means once, for the best."""
    n = cw.shape[0]
    total_w, total_wy, total_wyy = cw[n - 1], cwy[n - 1], cwyy[n - 1]
    dof = max(nonzero - 2.0, 1.0)
    best, best_key, best_stat = splits[0], -np.inf, 0.0
    for k in splits:
        wb = cw[k - 1]
        wa = total_w - wb
        stat = 0.0
        if wb >= MIN_WEIGHT and wa >= MIN_WEIGHT:
            wyb, wyyb = cwy[k - 1], cwyy[k - 1]
            wya, wyya = total_wy - wyb, total_wyy - wyyb
            mb, ma = wyb / wb, wya / wa
            scatter = (wyyb - wyb * mb) + (wyya - wya * ma)
            sigma2 = max(_finite(scatter / dof), floor)
            stat = (ma - mb) / np.sqrt(sigma2 / wb + sigma2 / wa)
            if not np.isfinite(stat):
                stat = 0.0
        key = stat * direction if direction else abs(stat)
        if key > best_key:
            best, best_key, best_stat = k, key, stat
    wb = cw[best - 1]
    wa = total_w - wb
    # an empty segment has no weighted values either (0/0, as numpy's NaN)
    mb = cwy[best - 1] / wb if wb != 0 else np.nan
    ma = (total_wy - cwy[best - 1]) / wa if wa != 0 else np.nan
    return best, _finite(mb), _finite(ma), best_stat


@njit(cache=True, nogil=True)
def _shifts(
    y: Array, w: Array, floor: Array, splits: Any, direction: int, step: int, refine_above: float
) -> tuple[Any, Array, Array, Array]:
    rows, windows = y.shape
    onset = np.empty(rows, np.int64)
    baseline, observed, score = np.empty(rows), np.empty(rows), np.empty(rows)
    cw, cwy, cwyy = np.empty(windows), np.empty(windows), np.empty(windows)
    coarse = splits[::step]
    for r in range(rows):
        acc_w = acc_wy = acc_wyy = nonzero = 0.0
        for t in range(windows):
            wt, yt = w[r, t], y[r, t]
            if wt > 0 and np.isfinite(yt):
                acc_w += wt
                acc_wy += wt * yt
                acc_wyy += wt * yt * yt
                nonzero += 1.0
            cw[t], cwy[t], cwyy[t] = acc_w, acc_wy, acc_wyy
        found = _search(cw, cwy, cwyy, nonzero, floor[r], coarse, direction)
        if step > 1 and abs(found[3]) >= refine_above:
            found = _search(cw, cwy, cwyy, nonzero, floor[r], splits, direction)
        onset[r], baseline[r], observed[r], score[r] = found
    return onset, baseline, observed, score


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
    every split (most rows of a large graph are healthy). One compiled pass per row: cumulative
    sums and split statistics without temporaries the size of the series."""
    rows, windows = y.shape
    splits = np.arange(max(first, 1), min(last, windows - 1) + 1)
    if splits.shape[0] == 0 or rows == 0:
        zeros = np.zeros(rows)
        return Shift(np.full(rows, max(first, 0), np.int64), zeros, zeros, zeros)
    floor = np.broadcast_to(np.asarray(variance_floor, np.float64).reshape(-1), (rows,))
    y64, w64 = np.ascontiguousarray(y, np.float64), np.ascontiguousarray(w, np.float64)
    onset, baseline, observed, score = _shifts(
        y64, w64, np.ascontiguousarray(floor), splits, direction, COARSE_STEP, REFINE_ABOVE
    )
    return Shift(onset, baseline, observed, score)
