"""Window series stay bounded by what the graph retains, however long an incident's window."""

from __future__ import annotations

import numpy as np

from rca.graph.series import SeriesCache, WindowSeries, window_series
from rca.graph.service_graph import ServiceGraph
from rca.graph.writer import concat
from simulation import simulate
from tests.spanfactory import T0, batch


def test_a_window_reaching_far_beyond_retention_has_only_the_retained_columns() -> None:
    graph = ServiceGraph(window_seconds=10.0, retention_seconds=60.0)
    graph.add(batch(*(("shop", "GET", i + 1, 0, i * 1000, 5) for i in range(50))))
    series = window_series(graph, T0 - 86_400 * 1_000_000_000, T0 - 3600 * 1_000_000_000, graph.newest_ns + 1)
    assert series.windows <= 7
    assert series.ops.sums[:, :, 0].sum() == 50


def _same(a: WindowSeries, b: WindowSeries) -> None:
    assert (a.first, a.windows, a.history) == (b.first, b.windows, b.history)
    for kind in ("ops", "edges", "signals"):
        x, y = getattr(a, kind), getattr(b, kind)
        assert np.array_equal(x.keys, y.keys), kind
        assert np.array_equal(x.sums, y.sums), kind


def test_a_cached_series_equals_one_built_afresh_as_spans_arrive_and_the_window_moves() -> None:
    case = simulate("boutique-latency", seed=1, rate=2)
    spans = concat(list(case.batches))
    graph, cache = ServiceGraph(window_seconds=10.0, retention_seconds=900.0), SeriesCache()
    minute = 60_000_000_000
    start = case.start_ns + 6 * minute
    reused = 0
    for k, stop in enumerate(range(case.start_ns + 7 * minute, case.end_ns, minute // 2)):
        graph.add(spans.select((spans.start_ns >= stop - minute // 2) & (spans.start_ns < stop)))
        if k % 3 == 2:  # late spans land in closed windows, which must then be rebuilt
            graph.add(
                spans.select((spans.start_ns >= stop - 4 * minute) & (spans.start_ns < stop - 4 * minute + 10**9))
            )
        window_start = start + (k // 4) * minute  # now and then the incident window moves on
        history = window_start - 10 * minute
        before = set(cache.stacked["edges"].identity) if cache.stacked else set()
        cached = window_series(graph, history, window_start, graph.newest_ns + 1, cache)
        _same(cached, window_series(graph, history, window_start, graph.newest_ns + 1))
        reused += len(before & set(cache.stacked["edges"].identity) - {()})  # columns copied, not built
        # unchanged graph: everything is copied, and still the same
        _same(window_series(graph, history, window_start, graph.newest_ns + 1, cache), cached)
    assert reused > 20
    assert not cached.edges.sums.flags.writeable


def test_a_key_new_in_the_open_window_and_later_spans_keep_the_cached_series_exact() -> None:
    """The open window gains spans of operations no closed window has (rows added to the copied
    ones), then more of known operations (the rows stay: one block is copied)."""
    graph, cache = ServiceGraph(window_seconds=10.0, retention_seconds=900.0), SeriesCache()
    spans = [("shop", ("GET", "PUT", "POST")[i % 3], i + 1, 0, i * 1000, 5 + i % 7) for i in range(60)]  # 1/s
    graph.add(batch(*spans))
    start, history = T0 + 30 * 1_000_000_000, T0

    def compared() -> WindowSeries:
        cached = window_series(graph, history, start, graph.newest_ns + 1, cache)
        _same(cached, window_series(graph, history, start, graph.newest_ns + 1))
        return cached

    first = compared()
    graph.add(batch(("shop", "HEAD", 101, 0, 59_500, 5), ("cart", "GET", 102, 0, 59_600, 5)))
    second = compared()
    assert second.ops.keys.shape[0] == first.ops.keys.shape[0] + 2
    graph.add(batch(("shop", "HEAD", 103, 0, 59_700, 5), ("cart", "GET", 104, 0, 59_800, 5)))
    third = compared()
    assert np.array_equal(third.ops.keys, second.ops.keys)
    assert third.ops.sums[:, -1, 0].sum() == second.ops.sums[:, -1, 0].sum() + 2


def test_a_window_moved_on_copies_the_columns_it_keeps_with_keys_that_come_and_go() -> None:
    """An incident starting a window or two later than the last one ranked keeps the columns both
    cover (shifted left, one block) and sums its history again: exact, whether an operation seen
    only in the oldest history leaves the keys or every key stays."""
    graph, cache = ServiceGraph(window_seconds=10.0, retention_seconds=900.0), SeriesCache()
    spans = [("shop", ("GET", "PUT")[i % 2], i + 1, 0, i * 1000, 5 + i % 5) for i in range(120)]
    graph.add(batch(*spans, ("shop", "OLD", 500, 0, 3_000, 5)))  # only in the first window
    second = 1_000_000_000

    def compared(start_s: int, history_s: int) -> WindowSeries:
        start, history = T0 + start_s * second, T0 + history_s * second
        before = set(cache.stacked["ops"].identity)
        cached = window_series(graph, history, start, graph.newest_ns + 1, cache)
        _same(cached, window_series(graph, history, start, graph.newest_ns + 1))
        assert len(before & set(cache.stacked["ops"].identity)) >= 6  # the windows both cover: copied
        return cached

    window_series(graph, T0, T0 + 30 * second, graph.newest_ns + 1, cache)
    first = compared(30, 0)
    moved = compared(40, 10)  # the first window leaves the history, and "OLD" the keys
    assert moved.ops.keys.shape[0] == first.ops.keys.shape[0] - 1
    again = compared(60, 10)  # the same keys, the kept columns two windows further left
    assert np.array_equal(again.ops.keys, moved.ops.keys)


def test_the_open_window_is_rewritten_in_place_only_once_no_earlier_series_is_held() -> None:
    """Ranked again as spans arrive, the series rewrites only its open window into the buffers it
    built last time, unless a series handed out earlier still reads them: that one never changes."""
    graph, cache = ServiceGraph(window_seconds=10.0, retention_seconds=900.0), SeriesCache()
    graph.add(batch(*(("shop", ("GET", "PUT")[i % 2], i + 1, 0, i * 1000, 5) for i in range(60))))
    start, history = T0 + 30 * 1_000_000_000, T0

    def cached() -> WindowSeries:
        return window_series(graph, history, start, graph.newest_ns + 1, cache)

    held = cached()
    kept = held.ops.sums.copy()
    graph.add(batch(("shop", "GET", 101, 0, 59_500, 5)))
    copied = cached()
    assert np.array_equal(held.ops.sums, kept)  # the held series is untouched
    assert not np.shares_memory(copied.ops.sums, held.ops.sums)
    address = copied.ops.sums.__array_interface__["data"][0]  # not the buffer itself: that would hold it
    del held, copied
    graph.add(batch(("shop", "PUT", 102, 0, 59_600, 5)))
    rewritten = cached()
    assert rewritten.ops.sums.__array_interface__["data"][0] == address
    _same(rewritten, window_series(graph, history, start, graph.newest_ns + 1))
    assert rewritten.ops.sums[:, -1, 0].sum() == kept[:, -1, 0].sum() + 2
    assert not rewritten.ops.sums.flags.writeable


def test_every_column_holds_its_windows_own_sums_row_by_row() -> None:
    """Checked against each window's table read key by key (not through the stacking code)."""
    case = simulate("boutique-errors", seed=2, rate=2)
    graph = ServiceGraph(window_seconds=10.0, retention_seconds=900.0)
    for spans in case.batches:
        graph.add(spans)
    first = min(graph.windows)
    series = window_series(graph, 0, first * graph.window_ns, graph.newest_ns + 1)
    assert not series.history and series.windows == len(graph.windows)
    row_of = {int(k): i for i, k in enumerate(series.edges.keys)}
    assert len(row_of) > 10
    for column, w in enumerate(range(first, first + series.windows)):
        expected = np.zeros(series.edges.sums.shape[::2])  # (rows, sums)
        if (window := graph.windows.get(w)) is not None:
            keys, sums, _ = window.edges.view()
            for key, values in zip(keys.tolist(), sums, strict=True):
                expected[row_of[key]] = values
        assert np.array_equal(series.edges.sums[:, column, :], expected), column
