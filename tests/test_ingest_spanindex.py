"""The numpy span index behaves as a ring of generations of dictionaries would."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rca.graph.spanindex import SpanIndex, SpanMarks, _Table
from rca.graph.urgency import RequestUrgency
from rca.graph.waiting import WaitLimit

batches = st.lists(st.lists(st.integers(1, 40), max_size=12), max_size=8)


@settings(max_examples=200, deadline=None)
@given(batches, st.integers(1, 10), st.integers(2, 5))
def test_index_matches_generations_of_dicts(insertions: list[list[int]], capacity: int, generations: int) -> None:
    index = SpanIndex(capacity=capacity, generations=generations)
    size = -(-capacity // (generations - 1))  # spans per generation
    tables: deque[dict[int, int]] = deque([{}], maxlen=generations)
    for step, ids in enumerate(insertions):
        start = 0
        while start < len(ids):  # each generation filled to its size, then the next
            room = size - len(tables[-1])
            if room == 0:
                tables.append({})
                continue
            for k, i in enumerate(ids[start : start + room], start):
                tables[-1][i] = 1000 * step + k
            start += room
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
        expected = [next((t[i] for t in reversed(tables) if i in t), -1) for i in range(1, 41)]
        assert found[:, 0].tolist() == expected
        assert found[:, 1].tolist() == [4 if e >= 0 else -1 for e in expected]
        assert found[:, 2].tolist() == [9 if e >= 0 else -1 for e in expected]
        assert found[:, 3].tolist() == [int(e % 3 == 0) if e >= 0 else -1 for e in expected]
        assert [None if np.isnan(d) else d for d in seconds.tolist()] == [e / 4.0 if e >= 0 else None for e in expected]


def test_a_span_stays_findable_for_capacity_later_spans_and_memory_is_bounded() -> None:
    index = SpanIndex(capacity=1000, generations=5)

    def insert(ids: np.ndarray, tag: int) -> None:
        n = ids.shape[0]
        index.insert(ids, np.full(n, tag, np.int64), np.full(n, -1, np.int64), np.zeros(n, np.int64), np.zeros(n))

    insert(np.arange(1, 101, dtype=np.uint64), 7)
    for part in np.array_split(np.arange(1001, 2001, dtype=np.uint64), 7):  # capacity later spans
        insert(part, 0)
    assert (index.lookup(np.arange(1, 101, dtype=np.uint64), 0)[0][:, 0] == 7).all()
    insert(np.arange(3001, 3251, dtype=np.uint64), 0)  # a quarter of capacity more: its generation goes
    assert (index.lookup(np.arange(1, 101, dtype=np.uint64), 0)[0][:, 0] == -1).all()


def test_ids_looked_up_in_vain_are_searched_again_only_in_generations_started_since(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = SpanIndex(capacity=40, generations=5)  # generations of 10
    searched: list[int] = []
    table_lookup = _Table.lookup
    monkeypatch.setattr(_Table, "lookup", lambda self, ids: searched.append(ids.shape[0]) or table_lookup(self, ids))

    def insert(ids: np.ndarray) -> None:
        n = ids.shape[0]
        index.insert(ids, np.arange(n), np.full(n, -1, np.int64), np.zeros(n, np.int64), np.zeros(n))

    insert(np.arange(1, 31, dtype=np.uint64))  # generations 0, 1, 2
    absent = np.arange(100, 108, dtype=np.uint64)
    assert (index.lookup(absent, 0)[0][:, 0] == -1).all()
    assert searched == [8, 8, 8]  # every generation
    since = np.full(8, index.generation, np.int32)
    insert(np.asarray([100, 101], np.uint64))  # two of them come, in generation 3
    searched.clear()
    found = index.lookup(absent, 0, since)[0][:, 0]
    assert found.tolist() == [0, 1, -1, -1, -1, -1, -1, -1]
    assert searched == [8, 6]  # generations 3 and 2 only
    old = np.asarray([5], np.uint64)  # in generation 0: found without `since`, not with it
    assert index.lookup(old, 0)[0][0, 0] == 4
    assert index.lookup(old, 0, np.asarray([index.generation], np.int32))[0][0, 0] == -1


def test_an_index_needs_two_generations() -> None:
    with pytest.raises(ValueError, match="at least 2 generations"):
        SpanIndex(capacity=10, generations=1)


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


def test_queue_times_waiting_for_a_mark_search_only_the_generations_started_since(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    urgency = RequestUrgency(capacity=40, limit=WaitLimit(10, 1000, 100))  # marks in generations of 10
    searched: list[int] = []
    table_lookup = _Table.lookup
    monkeypatch.setattr(_Table, "lookup", lambda self, ids: searched.append(ids.shape[0]) or table_lookup(self, ids))

    def add(traces: range, urgent: float, queue_s: float) -> None:
        n = len(traces)
        trace_id = np.stack([np.zeros(n, np.uint64), np.asarray(traces, np.uint64)], axis=1)
        urgent_col, queue_col = np.full(n, urgent), np.full(n, queue_s)
        urgency.add(trace_id, urgent_col, queue_col, np.zeros(n, np.int64), np.zeros(n, np.int64), 0)

    add(range(1, 31), 1.0, np.nan)  # 30 marked traces: generations 0, 1, 2
    add(range(100, 104), np.nan, 0.5)  # four queue times whose traces have no mark yet
    assert urgency.resolve(0, 0).node.shape[0] == 0
    assert searched == [4, 4, 4]  # every generation once
    add(range(100, 101), 0.0, np.nan)  # one trace's mark comes (ordinary), in generation 3
    searched.clear()
    marked = urgency.resolve(0, 0)
    assert marked.urgent.tolist() == [False]
    assert searched == [4, 3]  # generations 3 and 2 only: not the two before the first lookup
