"""Change points per row: the onset, levels and size of a shift, in the wanted direction."""

from __future__ import annotations

import numpy as np
import pytest

from rca.evidence.changepoint import mean_shift
from rca.evidence.rows import log_window_mean, per_window_mean

WINDOWS = 40


def test_a_step_is_found_at_its_onset_in_the_wanted_direction() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(1.0, 0.1, (2, WINDOWS))
    y[:, 25:] += np.array([[1.0], [-1.0]])
    w = np.full(y.shape, 10.0)
    up = mean_shift(y, w, first=3, last=WINDOWS - 3, direction=1, variance_floor=0.0)
    assert up.onset[0] == 25 and up.score[0] > 20
    assert up.baseline[0] == pytest.approx(1.0, abs=0.05) and up.observed[0] == pytest.approx(2.0, abs=0.05)
    assert up.score[1] <= 1.0  # a fall is no rise
    either = mean_shift(y, w, first=3, last=WINDOWS - 3, direction=0, variance_floor=0.0)
    assert either.onset[1] == 25 and either.score[1] < -20


def test_the_variance_floor_bounds_a_quiet_rows_statistic_and_sparse_segments_score_nothing() -> None:
    y = np.ones((2, WINDOWS))
    y[:, 25:] = 1.2  # a step with no scatter at all on either side
    w = np.ones(y.shape)
    w[1] = 0.0
    w[1, [0, 1, 25, 26]] = 1.0  # two observations each side, fewer than MIN_WEIGHT at any split
    floored = mean_shift(y, w, first=3, last=WINDOWS - 3, direction=1, variance_floor=0.01)
    standard_error = np.sqrt(0.01 / 25 + 0.01 / 15)
    assert floored.score[0] == pytest.approx(0.2 / standard_error)
    assert floored.score[1] == 0.0


def test_a_window_mean_is_nan_where_nothing_was_counted() -> None:
    total = np.array([[3.0, 0.0, 5.0, 2.0], [1.0, 4.0, 0.0, 0.0]])
    count = np.array([[2.0, 0.0, np.nan, -1.0], [4.0, 2.0, 3.0, 0.0]])
    mean = per_window_mean(total, count)
    assert np.array_equal(mean, [[1.5, np.nan, np.nan, np.nan], [0.25, 2.0, 0.0, np.nan]], equal_nan=True)
    assert np.array_equal(per_window_mean(np.ones((2, 3), np.int64), np.full((2, 3), 4)), np.full((2, 3), 0.25))


def test_a_log_window_mean_reads_0_where_nothing_was_counted_and_shifts_alike() -> None:
    rng = np.random.default_rng(3)
    total, count = rng.exponential(0.01, (50, WINDOWS)), rng.poisson(2.0, (50, WINDOWS)).astype(float)
    logged = log_window_mean(total, count, 1e-3)
    with np.errstate(invalid="ignore"):
        reference = np.log(np.maximum(per_window_mean(total, count), 1e-3))  # NaN where count is 0
    assert (count == 0).any() and np.array_equal(logged[count > 0], reference[count > 0])
    assert np.all(logged[count == 0] == 0.0)
    # the shift test weighs a window by its count: an empty one's value is never read
    new, old = (
        mean_shift(y, count, first=3, last=WINDOWS - 3, direction=1, variance_floor=0.05) for y in (logged, reference)
    )
    assert np.any(new.score > 0)
    for field in ("onset", "baseline", "observed", "score"):
        assert np.array_equal(getattr(new, field), getattr(old, field))
