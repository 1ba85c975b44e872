"""Row-level evidence before it is reduced to nodes: the rows' shifts, what they measured, and
the count test that keeps a handful of observations honest."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numba import njit
from scipy.sparse import csr_matrix
from scipy.special import ndtri_exp
from scipy.stats import binom

from rca.evidence.changepoint import Shift

Array = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]
MAX_SCORE = 60.0  # a row's score beyond this tells no more


@dataclass(frozen=True, slots=True)
class Labels:
    """What rows measured, named only for the rows that end up as evidence: `prefix:name`."""

    prefix: str
    index: Index  # per row, the id `name` names; -1 for the bare prefix
    name: Callable[[int], str] = str

    def __len__(self) -> int:
        return int(self.index.shape[0])

    def texts(self, rows: list[int]) -> list[str]:
        """`prefix:name` of each of `rows` (`name` alone where the prefix is empty)."""
        name, prefix = self.name, self.prefix
        found = [name(i) if i >= 0 else "" for i in self.index[rows].tolist()]
        return [f"{prefix}:{text}" if text and prefix else text or prefix for text in found]


@dataclass(slots=True)
class Rows:
    """Row-level shifts of one class, before they are reduced to nodes."""

    node: Index
    shift: Shift
    labels: list[Labels]
    score: Array

    def label_rows(self, rows: Index) -> list[str]:
        """What each of `rows` measured, named part by part."""
        out = [""] * rows.shape[0]
        offset = 0
        for part in self.labels:
            inside = np.flatnonzero((rows >= offset) & (rows < offset + len(part)))
            for k, text in zip(inside.tolist(), part.texts((rows[inside] - offset).tolist()), strict=True):
                out[k] = text
            offset += len(part)
        return out


def per_window_mean(total: Array, count: Array) -> Array:
    """`total / count` of two (rows x windows) arrays, NaN where nothing was counted."""
    return _window_mean(np.asarray(total, np.float64), np.asarray(count, np.float64), np.nan)


def log_window_mean(total: Array, count: Array, floor: float) -> Array:
    """log max(`total / count`, `floor`) per window, for a series the shift test weighs by
    `count`: a window that counted nothing weighs nothing there and reads 0 here, not NaN (a NaN
    takes numpy's log off its vector loop, five times slower)."""
    return np.log(np.maximum(_window_mean(np.asarray(total, np.float64), np.asarray(count, np.float64), 1.0), floor))


@njit(cache=True, nogil=True)
def _window_mean(total: Array, count: Array, empty: float) -> Array:  # one pass: no mask, no temporaries
    rows, windows = total.shape
    mean = np.empty((rows, windows))
    for r in range(rows):
        for t in range(windows):
            c = count[r, t]
            mean[r, t] = total[r, t] / c if c > 0 else empty
    return mean


def sum_rows(index: Index, values: Array, n: int) -> Array:
    """(n, ...) sums of the rows of `values` by their row in the result, `index` (what
    `np.add.at` does, as one sparse product)."""
    flat = values.reshape(values.shape[0], int(np.prod(values.shape[1:])))
    gather = csr_matrix((np.ones(index.shape[0]), (index, np.arange(index.shape[0]))), shape=(n, index.shape[0]))
    total: Array = np.asarray(gather @ flat).reshape(n, *values.shape[1:])
    return total


def find_sorted(keys: Index, values: Index) -> tuple[Index, npt.NDArray[np.bool_]]:
    """Where each of `values` sits in the sorted `keys` (a valid index, 0 when `keys` is empty),
    and whether it is there."""
    if keys.shape[0] == 0:
        return np.zeros(values.shape[0], np.int64), np.zeros(values.shape[0], np.bool_)
    position = np.minimum(np.searchsorted(keys, values), keys.shape[0] - 1)
    return position, keys[position] == values


def binomial_score(shift: Shift, rows: Index, weight: Array, lower: npt.NDArray[np.bool_] | None = None) -> Array:
    """How surprising the observed counts of `rows` (with their trials per window, `weight`) are:
    the mid-p binomial tail of the observed segment's count at the baseline's rate (with half a
    count of prior, so a spotless baseline still has a rate), as a standard normal score; the
    lower tail where `lower` holds (a rate that fell). The Welch statistic of `mean_shift` floors
    the variance for all rows alike; a count test stays honest for a handful of calls, where one
    failure in three would otherwise read as 5 sigma."""
    onset = shift.onset[rows]
    total = np.cumsum(np.nan_to_num(weight), axis=1)
    before = np.take_along_axis(total, np.clip(onset - 1, 0, total.shape[1] - 1)[:, None], axis=1)[:, 0]
    before = np.where(onset > 0, before, 0.0)
    after = total[:, -1] - before
    rate = (np.nan_to_num(shift.baseline[rows]) * before + 0.5) / (before + 1.0)
    trials = np.rint(after)
    count = np.clip(np.rint(np.nan_to_num(shift.observed[rows]) * after), 0.0, trials)
    half = np.log(0.5) + binom.logpmf(count, trials, rate)
    log_tail = np.logaddexp(binom.logsf(count, trials, rate), half)
    if lower is not None and lower.any():
        log_tail = np.where(lower, np.logaddexp(binom.logcdf(count - 1, trials, rate), half), log_tail)
    with np.errstate(over="ignore"):
        return np.where(trials > 0, np.maximum(-ndtri_exp(np.minimum(log_tail, 0.0)), 0.0), 0.0)


def merge_rows(a: Rows, b: Rows) -> Rows:
    shift = Shift(
        np.concatenate([a.shift.onset, b.shift.onset]),
        np.concatenate([a.shift.baseline, b.shift.baseline]),
        np.concatenate([a.shift.observed, b.shift.observed]),
        np.concatenate([a.shift.score, b.shift.score]),
    )
    return Rows(np.concatenate([a.node, b.node]), shift, [*a.labels, *b.labels], np.concatenate([a.score, b.score]))
