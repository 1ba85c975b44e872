"""The service-causality graph: edges across batches, self time, virtual nodes, windows."""

from __future__ import annotations

import numpy as np

from rca.accumulators import OpSum, WindowAggregate
from rca.graph import ServiceGraph
from rca.graphview import Window, build_digraph, graph_between
from tests.spanfactory import T0, batch

WIDE = Window(T0 - 10**12, T0 + 10**12)


def test_parent_arriving_in_a_later_batch_still_makes_the_edge() -> None:
    graph = ServiceGraph()
    graph.add(batch(("checkout", "PlaceOrder", 2, 1, 1, 30)))
    assert graph_between(graph, WIDE).number_of_edges() == 0
    graph.add(batch(("frontend", "GET /cart", 1, 0, 0, 50)))
    view = graph_between(graph, WIDE)
    assert list(view.edges) == [("frontend", "checkout")]
    assert view.edges["frontend", "checkout"]["calls"] == 1.0
    assert graph.counts().pending == 0


def test_self_time_subtracts_direct_children() -> None:
    graph = ServiceGraph()
    graph.add(batch(("a", "root", 1, 0, 0, 100), ("b", "x", 2, 1, 10, 30), ("a", "local", 3, 1, 50, 20)))
    view = graph_between(graph, WIDE)
    root = view.nodes["a"]["operations"]["root"]
    assert abs(root["self_time_mean_s"] - 0.050) < 1e-9  # 100 - 30 - 20 ms
    assert abs(view.nodes["b"]["self_time_mean_s"] - 0.030) < 1e-9


def test_windows_are_keyed_by_event_time_and_select_by_range() -> None:
    graph = ServiceGraph(window_seconds=10)
    graph.add(batch(("a", "op", 1, 0, 0, 5), ("a", "op", 2, 0, 25_000, 5)))
    first = graph_between(graph, Window(T0, T0 + 10**10))
    assert first.nodes["a"]["calls"] == 1.0
    assert graph_between(graph, WIDE).nodes["a"]["calls"] == 2.0


def test_retention_evicts_old_windows_and_counts_late_spans() -> None:
    graph = ServiceGraph(window_seconds=10, retention_seconds=60)
    graph.add(batch(("a", "op", 1, 0, 0, 5)))
    graph.add(batch(("a", "op", 2, 0, 120_000, 5)))
    assert len(graph.windows) == 1
    graph.add(batch(("a", "op", 3, 0, 1_000, 5)))
    assert graph.counts().outside_retention == 1
    assert graph_between(graph, WIDE).nodes["a"]["calls"] == 1.0


def test_children_whose_parents_never_come_are_orphaned_not_kept_forever() -> None:
    graph = ServiceGraph(window_seconds=1, pending_windows=2)
    graph.add(batch(("b", "x", 2, 99, 0, 5)))
    graph.add(batch(("a", "op", 3, 0, 10_000, 5)))
    graph.resolve()
    assert graph.counts().orphaned == 1
    assert graph.counts().pending == 0


def test_window_aggregates_merge_like_one_window() -> None:
    one, two = ServiceGraph(), ServiceGraph()
    spans = [("a", "root", 1, 0, 0, 100), ("b", "x", 2, 1, 10, 30)]
    one.add(batch(*spans))
    two.add(batch(spans[0]))
    two.add(batch(spans[1]))
    merged = WindowAggregate.new()
    for w in list(two.windows.values()):
        merged.merge(w)
    a = build_digraph(one.aggregate(WIDE.start_ns, WIDE.end_ns), one.names)
    b = build_digraph(two.aggregate(WIDE.start_ns, WIDE.end_ns), two.names)
    assert a.nodes["a"]["calls"] == b.nodes["a"]["calls"] == 1.0
    assert merged.ops.view()[1][:, OpSum.CALLS].sum() == 2.0
    assert set(a.edges) == set(b.edges) == {("a", "b")}


def test_nccl_latency_keeps_point_to_point_apart_from_collectives() -> None:
    from rca.conventions import with_nccl_latency
    from rca.spans import N_SIGNALS, Signal

    strings = ("model_forward", "nccl:AllReduce", "nccl:Send", "nccl:Recv")
    operation = np.asarray([0, 1, 2, 3], np.int32)
    start = np.full(4, 1_000_000_000, np.int64)
    end = start + np.asarray([500_000_000, 200_000_000, 4_000, 5_000])  # 0.5 s, 0.2 s, 4 µs, 5 µs
    signals = np.full((4, N_SIGNALS), np.nan)
    out = with_nccl_latency(signals, strings, operation, start, end)
    assert np.isnan(signals).all()  # the input is left alone
    assert np.isnan(out[0, [Signal.NCCL_LATENCY, Signal.NCCL_P2P_LATENCY]]).all()
    assert out[1, Signal.NCCL_LATENCY] == 0.2 and np.isnan(out[1, Signal.NCCL_P2P_LATENCY])
    assert out[2:, Signal.NCCL_P2P_LATENCY].tolist() == [4e-6, 5e-6]
    assert np.isnan(out[2:, Signal.NCCL_LATENCY]).all()
    assert with_nccl_latency(signals, ("a",), operation[:1], start[:1], end[:1]) is signals
