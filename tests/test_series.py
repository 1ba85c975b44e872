"""Window series stay bounded by what the graph retains, however long an incident's window."""

from __future__ import annotations

from rca.graph import ServiceGraph
from rca.series import window_series
from tests.spanfactory import T0, batch


def test_a_window_reaching_far_beyond_retention_has_only_the_retained_columns() -> None:
    graph = ServiceGraph(window_seconds=10.0, retention_seconds=60.0)
    graph.add(batch(*(("shop", "GET", i + 1, 0, i * 1000, 5) for i in range(50))))
    series = window_series(graph, T0 - 86_400 * 1_000_000_000, T0 - 3600 * 1_000_000_000, graph.newest_ns + 1)
    assert series.windows <= 7
    assert series.ops.sums[:, :, 0].sum() == 50
