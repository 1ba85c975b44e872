"""The numpy span index behaves as two generations of dictionaries would."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rca.graph.spanindex import SpanIndex, SpanMarks

batches = st.lists(st.lists(st.integers(1, 40), max_size=12), max_size=8)


@settings(max_examples=200, deadline=None)
@given(batches, st.integers(1, 10))
def test_index_matches_two_generations_of_dicts(insertions: list[list[int]], capacity: int) -> None:
    index = SpanIndex(capacity=capacity)
    current: dict[int, int] = {}
    previous: dict[int, int] = {}
    placed = 0  # distinct ids in the current generation
    for step, ids in enumerate(insertions):
        for start in range(0, len(ids), capacity):
            chunk = ids[start : start + capacity]
            if placed + len(chunk) > capacity:
                previous, current, placed = current, {}, 0
            for k, i in enumerate(chunk, start):
                placed += i not in current
                current[i] = 1000 * step + k
        nodeops = 1000 * step + np.arange(len(ids), dtype=np.int64)
        index.insert(
            np.asarray(ids, np.uint64),
            nodeops,
            np.full(len(ids), 4, np.int64),
            np.full(len(ids), 9, np.int64),
            nodeops / 4.0,  # a duration per entry (exact in float32 at these sizes)
            nodeops % 3 == 0,  # failed
        )
        probe = np.arange(1, 41, dtype=np.uint64)
        found, seconds = index.lookup(probe, 9)
        expected = [current.get(i, previous.get(i, -1)) for i in range(1, 41)]
        assert found[:, 0].tolist() == expected
        assert found[:, 1].tolist() == [4 if e >= 0 else -1 for e in expected]
        assert found[:, 2].tolist() == [9 if e >= 0 else -1 for e in expected]
        assert found[:, 3].tolist() == [int(e % 3 == 0) if e >= 0 else -1 for e in expected]
        assert [None if np.isnan(d) else d for d in seconds.tolist()] == [e / 4.0 if e >= 0 else None for e in expected]


def test_index_holds_a_large_batch_and_finds_every_id() -> None:
    rng = np.random.default_rng(3)
    ids = rng.integers(1, 2**63, 50_000, dtype=np.int64).astype(np.uint64)
    index = SpanIndex(capacity=100_000)
    rows = np.arange(50_000, dtype=np.int64)
    index.insert(ids, rows, np.full(50_000, -1, np.int64), np.zeros(50_000, np.int64), rows * 1e-3)
    assert (index.lookup(ids, 0)[0][:, 1] == -1).all()
    assert (index.lookup(ids, 0)[0][:, 3] == 0).all()  # not said to have failed
    found, seconds = index.lookup(ids[::-1], 0)
    assert (found[:, 0] == rows[::-1]).all()
    assert np.allclose(seconds, rows[::-1] * 1e-3)
    missing, no_seconds = index.lookup(np.asarray([7, 8], np.uint64), 0)
    assert (missing == -1).all() and np.isnan(no_seconds).all()


def test_marks_are_found_by_span_id_and_unknown_ids_read_minus_one() -> None:
    marks = SpanMarks(capacity=8)
    ids = np.array([11, 12, 13], np.uint64)
    marks.insert(ids, np.array([1, 0, 1]), np.array([5, 5, 6]))
    found = marks.lookup(np.array([13, 12, 99, 11], np.uint64), newest_window=6)
    assert found.tolist() == [1, 0, -1, 1]
