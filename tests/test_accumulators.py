"""The int index and the keyed table built on it behave as dictionaries would."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rca.graph.accumulators import KeyedTable
from rca.graph.histogram import N_BUCKETS
from rca.graph.intindex import IntIndex

# Keys from a small range repeat within and across batches; large ones (callers packed in the
# high 32 bits, as the graph's edge keys are) collide in the low bits.
keys = st.one_of(st.integers(0, 50), st.integers(0, 2**40).map(lambda k: k << 20))
batches = st.lists(st.lists(st.tuples(keys, st.integers(0, N_BUCKETS - 1)), max_size=60), max_size=6)


def _model(insertions: list[list[tuple[int, int]]]) -> tuple[dict[int, float], dict[int, dict[int, int]]]:
    sums: dict[int, float] = defaultdict(float)
    hist: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for step, batch in enumerate(insertions):
        for key, bucket in batch:
            sums[key] += step + 1
            hist[key][bucket] += 1
    return sums, hist


def _table(table: KeyedTable) -> tuple[dict[int, float], dict[int, dict[int, int]]]:
    keys, sums, hist = table.view()
    rows = {int(k): r for r, k in enumerate(keys.tolist())}
    assert len(rows) == len(table), "keys are distinct"
    return (
        {k: float(sums[r, 0]) for k, r in rows.items()},
        {k: {int(b): int(hist[r, b]) for b in np.flatnonzero(hist[r])} for k, r in rows.items()},
    )


@settings(max_examples=150, deadline=None)
@given(batches)
def test_adds_sum_per_key_in_order_of_first_appearance(insertions: list[list[tuple[int, int]]]) -> None:
    table = KeyedTable(2)
    for step, batch in enumerate(insertions):
        k = np.asarray([key for key, _ in batch], np.int64)
        sums = np.column_stack([np.full(len(batch), step + 1.0), np.zeros(len(batch))])
        table.add(k, sums, np.asarray([b for _, b in batch], np.intp))
    assert _table(table) == _model(insertions)
    first_seen = list(dict.fromkeys(key for batch in insertions for key, _ in batch))
    assert table.view()[0].tolist() == first_seen


@settings(max_examples=100, deadline=None)
@given(batches, batches)
def test_merge_equals_adding_both(left: list[list[tuple[int, int]]], right: list[list[tuple[int, int]]]) -> None:
    tables = []
    for insertions in (left, right):
        table = KeyedTable(2)
        for step, batch in enumerate(insertions):
            sums = np.column_stack([np.full(len(batch), step + 1.0), np.zeros(len(batch))])
            k = np.asarray([key for key, _ in batch], np.int64)
            table.add(k, sums, np.asarray([b for _, b in batch], np.intp))
        tables.append(table)
    tables[0].merge(tables[1])
    expected_sums, expected_hist = _model(left)
    right_sums, right_hist = _model(right)
    for key, value in right_sums.items():
        expected_sums[key] += value
        for bucket, count in right_hist[key].items():
            expected_hist[key][bucket] += count
    assert _table(tables[0]) == (expected_sums, expected_hist)


def test_rows_without_buckets_leave_the_histogram_alone() -> None:
    table = KeyedTable(1)
    table.add(np.asarray([7, 7, 9], np.int64), np.ones((3, 1)), None)
    keys, sums, hist = table.view()
    assert keys.tolist() == [7, 9] and sums[:, 0].tolist() == [2.0, 1.0]
    assert not hist.any()


def test_int_index_gives_dense_ids_in_order_of_first_appearance_across_growth() -> None:
    rng = np.random.default_rng(5)
    index, model = IntIndex(), {}
    for size in (10, 1_000, 30_000):
        keys = rng.integers(-(2**62), 2**62, size // 2).repeat(2)  # every key twice in a batch
        rng.shuffle(keys)
        ids = index.ids(keys)
        expected = [model.setdefault(int(k), len(model)) for k in keys.tolist()]
        assert ids.tolist() == expected
    assert len(index) == len(model) and index.keys.tolist() == list(model)
