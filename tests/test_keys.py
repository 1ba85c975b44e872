"""Packed table keys: every kind splits back into what built it, and an id too big is refused."""

from __future__ import annotations

import numpy as np
import pytest

from rca.graph.keys import (
    high,
    low,
    measure_key,
    measure_node,
    measure_of,
    pair_key,
    signal_key,
    signal_node,
    signal_of,
)


def test_keys_split_back_into_their_parts() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1 << 31, 1000)
    b = rng.integers(0, 1 << 32, 1000)
    keys = pair_key(a, b)
    assert (keys >= 0).all()
    np.testing.assert_array_equal(high(keys), a)
    np.testing.assert_array_equal(low(keys), b)
    nodes, signals = rng.integers(0, 1 << 40, 100), rng.integers(0, 256, 100)
    np.testing.assert_array_equal(signal_node(signal_key(nodes, signals)), nodes)
    np.testing.assert_array_equal(signal_of(signal_key(nodes, signals)), signals)
    measures = rng.integers(0, 1 << 16, 100)
    np.testing.assert_array_equal(measure_node(measure_key(nodes, measures)), nodes)
    np.testing.assert_array_equal(measure_of(measure_key(nodes, measures)), measures)


def test_distinct_parts_make_distinct_keys() -> None:
    parts = np.array([[0, 1], [1, 0], [1, 1], [0, (1 << 32) - 1], [1, 0]])
    keys = pair_key(parts[:, 0], parts[:, 1])
    assert len(set(keys.tolist())) == 4  # the repeated pair only


@pytest.mark.parametrize(
    "build",
    [
        lambda: pair_key(np.array([1 << 31]), np.array([0])),
        lambda: pair_key(np.array([0]), np.array([1 << 32])),
        lambda: pair_key(np.array([-1]), np.array([0])),
        lambda: signal_key(np.array([3]), 256),
        lambda: measure_key(np.array([3]), np.array([1 << 16])),
    ],
)
def test_a_part_that_does_not_fit_is_refused(build: object) -> None:
    with pytest.raises(OverflowError, match="ids must lie in"):
        build()  # type: ignore[operator]
