"""The service-causality graph: edges across batches, self time, virtual nodes, windows, and
lockstep collectives matched with their compute siblings."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from rca.graph.accumulators import OpSum, SignalSum, WindowAggregate
from rca.graph.keys import signal_node, signal_of
from rca.graph.lockstep import Lockstep
from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, build_digraph, graph_between
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.conventions import AttrValue
from rca.telemetry.spans import Signal, SpanBatch
from tests.spanfactory import T0, batch, sid, tid

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


def test_children_called_in_parallel_count_their_covered_time_once() -> None:
    # a works 10 ms, then calls b and c at once (20 ms each), then d after a 5 ms pause; e is
    # another request's parallel pair whose second child overlaps the first by half
    graph = ServiceGraph()
    graph.add(
        batch(
            ("a", "root", 1, 0, 0, 45),
            ("b", "x", 2, 1, 10, 20),
            ("c", "y", 3, 1, 10, 20),
            ("d", "z", 4, 1, 35, 10),
            ("e", "root", 5, 0, 0, 50),
            ("b", "x", 6, 5, 0, 20),
        )
    )
    graph.add(batch(("c", "y", 7, 5, 10, 20)))  # a sibling in a later batch still joins its parent
    view = graph_between(graph, WIDE)
    assert abs(view.nodes["a"]["operations"]["root"]["self_time_mean_s"] - 0.015) < 1e-9  # 45 - (20 + 10)
    assert abs(view.nodes["e"]["operations"]["root"]["self_time_mean_s"] - 0.020) < 1e-9  # 50 - 30 covered


def test_a_child_outlasting_its_parent_leaves_the_parent_no_less_than_no_time() -> None:
    # b's host clock runs 15 ms ahead: its 30 ms span ends 10 ms after its caller's 25 ms one
    # (another request's 40 ms of own time beside it must not be pulled down by it)
    graph = ServiceGraph()
    graph.add(batch(("a", "root", 1, 0, 0, 25), ("b", "x", 2, 1, 5, 30), ("a", "root", 3, 0, 100, 40)))
    view = graph_between(graph, WIDE)
    assert abs(view.nodes["a"]["operations"]["root"]["self_time_mean_s"] - 0.020) < 1e-9  # (0 + 40) / 2, not 17.5


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
    """Once `pending_windows` of event time and `index_capacity` spans have passed."""
    graph = ServiceGraph(window_seconds=1, pending_windows=2, index_capacity=2)
    graph.add(batch(("b", "x", 2, 99, 0, 5)))
    graph.add(batch(("a", "op", 3, 0, 10_000, 5)))
    graph.resolve()
    assert graph.counts().pending == 1 and graph.counts().orphaned == 0  # one span since: it waits on
    graph.add(batch(("a", "op", 4, 0, 10_001, 5)))
    graph.resolve()
    assert graph.counts().orphaned == 1
    assert graph.counts().pending == 0


def test_a_child_stops_waiting_once_its_window_leaves_the_retention() -> None:
    """However few spans came since: what it would count on is gone."""
    graph = ServiceGraph(window_seconds=1, retention_seconds=5, pending_windows=2)
    graph.add(batch(("b", "x", 2, 99, 0, 5)))
    graph.add(batch(("a", "op", 3, 0, 4_000, 5)))
    graph.resolve()
    assert graph.counts().pending == 1  # out of event time, but few spans came: it waits on
    graph.add(batch(("a", "op", 4, 0, 5_000, 5)))  # its window leaves the retention
    graph.resolve()
    assert graph.counts().orphaned == 1 and graph.counts().pending == 0


def test_a_replay_service_by_service_pairs_children_with_parents_that_come_long_after() -> None:
    """A replay that sends one service's whole history, then its caller's: the children wait far
    past `pending_windows` of event time, as long as fewer than `index_capacity` spans came since."""
    children = [("b", "x", 100 + k, k + 1, k * 1000, 5) for k in range(30)]  # 30 s of them first
    parents = [("a", "op", k + 1, 0, k * 1000, 10) for k in range(30)]
    graph = ServiceGraph(window_seconds=1, pending_windows=2)
    graph.add(batch(*children))
    graph.resolve()  # as a read or a full pass would, before the parents come
    graph.add(batch(*parents))
    graph.resolve()
    assert graph.counts().orphaned == 0 and graph.counts().edges_resolved == 30
    assert graph_between(graph, WIDE).edges[("a", "b")]["calls"] == 30.0


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
    from rca.telemetry.conventions import with_nccl_latency
    from rca.telemetry.spans import N_SIGNALS, Signal

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


def _gpu_batch(*spans: tuple[str, str, int, int, int, int, Mapping[str, AttrValue]]) -> SpanBatch:
    """Spans (service, name, span id, parent id or 0, start ms, duration ms, attributes) on host `h`."""
    builder = SpanBatchBuilder()
    for service, name, span_id, parent, start_ms, dur_ms, attributes in spans:
        start = T0 + start_ms * 1_000_000
        parent_id = sid(parent) if parent else b""
        end = start + dur_ms * 1_000_000
        builder.add(
            tid(1), sid(span_id), parent_id, service, name, 1, start, end, False, attributes, {"host.name": "h"}
        )
    return builder.build().batch


def _op_sums(graph: ServiceGraph, node: str, op: str) -> npt.NDArray[np.float64]:
    keys, sums, _ = graph.aggregate(WIDE.start_ns, WIDE.end_ns).ops.view()
    nodeop = graph.names.nodeops(np.asarray([graph.names.node_ids[node]]), np.asarray([graph.names.op_ids[op]]))
    row: npt.NDArray[np.float64] = sums[int(np.flatnonzero(keys == nodeop[0])[0])]
    return row


def _signal_sums(graph: ServiceGraph, node: str, signal: Signal) -> npt.NDArray[np.float64]:
    """A node's sums of one signal, its instances' (`NodeKind.INSTANCE`) summed in."""
    keys, sums, _ = graph.aggregate(WIDE.start_ns, WIDE.end_ns).signals.view()
    mine = (graph.names.signal_owners(signal_node(keys)) == graph.names.node_ids[node]) & (signal_of(keys) == signal)
    assert mine.any(), f"no {signal.name} on {node}"
    row: npt.NDArray[np.float64] = sums[mine].sum(axis=0)
    return row


def test_a_collective_meets_its_compute_sibling_across_batches_and_counts_once() -> None:
    graph = ServiceGraph()
    forward = ("w0", "model_forward", 2, 1, 10, 100, {"gpu.id": "0"})
    graph.add(_gpu_batch(("engine", "llm_request", 1, 0, 0, 300, {}), forward))
    graph.add(_gpu_batch(("w0", "nccl:AllReduce", 3, 1, 60, 100, {})))  # begun inside the forward, ends past it
    for _ in range(2):  # every read resolves; what matched counts once
        overlap = _signal_sums(graph, "w0", Signal.NCCL_OVERLAP)  # all it ran before the forward ended
        assert overlap[SignalSum.COUNT] == 1.0 and abs(overlap[SignalSum.SUM] - 1.0) < 1e-9
        for node in ("w0", "gpu:h/0"):  # the forward waited 50 ms: its self time is 50 ms
            sums = _op_sums(graph, node, "model_forward")
            assert abs(sums[OpSum.WAIT] - 0.05) < 1e-9 and abs(sums[OpSum.DURATION] - 0.1) < 1e-9


def test_nccl_calls_that_name_their_gpu_are_no_compute_spans() -> None:
    # the collective starts as the forward ends (it no longer overlaps it); it and a send name the GPU
    graph = ServiceGraph()
    graph.add(
        _gpu_batch(
            ("engine", "llm_request", 1, 0, 0, 300, {}),
            ("w0", "model_forward", 2, 1, 10, 100, {"gpu.id": "0"}),
            ("w0", "nccl:AllReduce", 3, 1, 110, 40, {"gpu.id": "0"}),
            ("w0", "nccl:Send", 4, 1, 120, 1, {"gpu.id": "0"}),
        )
    )
    overlap = _signal_sums(graph, "w0", Signal.NCCL_OVERLAP)
    assert overlap[SignalSum.COUNT] == 1.0 and overlap[SignalSum.SUM] == 0.0
    assert _op_sums(graph, "gpu:h/0", "nccl:AllReduce")[OpSum.WAIT] == 0.0


def test_collectives_of_other_parents_or_ranks_are_no_siblings() -> None:
    graph = ServiceGraph()
    graph.add(
        _gpu_batch(
            ("engine", "llm_request", 1, 0, 0, 300, {}),
            ("w0", "model_forward", 2, 1, 10, 100, {"gpu.id": "0"}),
            ("w0", "nccl:AllReduce", 3, 2, 20, 10, {}),  # a child of the forward, as in the fixture
            ("w1", "nccl:AllReduce", 4, 1, 20, 10, {}),  # another rank's
        )
    )
    assert _op_sums(graph, "w0", "model_forward")[OpSum.WAIT] == 0.0
    keys = graph.aggregate(WIDE.start_ns, WIDE.end_ns).signals.view()[0]
    assert not ((keys & 0xFF) == Signal.NCCL_OVERLAP).any()


def test_lockstep_spans_wait_for_their_siblings_until_stale_and_wait_no_longer_than_they_ran() -> None:
    lockstep = Lockstep(pending_windows=2)
    one = np.ones(1, np.bool_)

    def add(collective: bool, start_ns: int, end_ns: int, window: int) -> None:
        lockstep.add(
            one if collective else ~one,
            ~one if collective else one,
            parent=np.asarray([7], np.uint64),
            node=np.asarray([1]),
            nodeop=np.asarray([5]),
            gpu_nodeop=np.asarray([6]),
            start_ns=np.asarray([start_ns]),
            end_ns=np.asarray([end_ns]),
            window=np.asarray([window]),
        )

    add(True, 0, 100, 0)
    assert lockstep.match(newest_window=0) is not None and len(lockstep) == 1  # the collective waits
    add(False, 0, 60, 0)
    add(True, 20, 100, 0)  # a second collective of the same forward
    add(True, 70, 100, 0)  # and a third, begun after it ended: it overlapped none of it
    found = lockstep.match(newest_window=0)
    # shares of the time each ran before the forward ended: a wait past its end is no lost overlap
    assert found is not None and found.overlap_share.tolist() == [1.0, 1.0, 0.0]
    assert found.wait_s.tolist() == [60e-9]  # 100 ns of overlap, capped at the forward's 60 ns
    assert found.compute_nodeop.tolist() == [5] and found.compute_gpu_nodeop.tolist() == [6]
    assert len(lockstep) == 1  # the forward stays for collectives still to come
    assert lockstep.match(newest_window=3) is None and len(lockstep) == 0  # then it is stale


def test_a_span_on_a_gpu_counts_the_gpus_signals_there_and_the_rest_on_its_service() -> None:
    graph = ServiceGraph()
    attributes: dict[str, AttrValue] = {"gpu.id": "0", "gen_ai.latency.time_in_queue": 0.2, "gpu.dram.bytes": 5e9}
    graph.add(_gpu_batch(("engine", "llm_request", 1, 0, 0, 300, attributes)))
    assert _signal_sums(graph, "engine", Signal.QUEUE_TIME)[SignalSum.SUM] == 0.2
    assert _signal_sums(graph, "gpu:h/0", Signal.GPU_DRAM_BYTES)[SignalSum.SUM] == 5e9
    keys = graph.aggregate(WIDE.start_ns, WIDE.end_ns).signals.view()[0]
    owners = graph.names.signal_owners(signal_node(keys))
    assert sorted(graph.names.nodes[k] for k in owners.tolist()) == ["engine", "gpu:h/0"]
    assert sorted(graph.names.nodes[k] for k in signal_node(keys).tolist()) == ["engine@h", "gpu:h/0"]  # its pod's


def _request_spans(trace: int, *spans: tuple[str, int, int, Mapping[str, AttrValue]]) -> SpanBatch:
    """One request's spans (service, span id, parent id or 0, attributes), each in trace `trace`."""
    builder = SpanBatchBuilder()
    for service, span_id, parent, attributes in spans:
        parent_id = sid(parent) if parent else b""
        builder.add(tid(trace), sid(span_id), parent_id, service, "op", 2, T0, T0 + 10**9, False, attributes, {})
    return builder.build().batch


def test_a_priority_mark_anywhere_on_the_trace_tells_the_engines_queue_time_in_any_arrival_order() -> None:
    # the gateway captures the x-priority header, a router passes the request on, vLLM's span
    # carries the queue time alone; the engine's spans come first, the gateway's last
    graph = ServiceGraph()
    queued = [("engine", 13, 12, {"gen_ai.latency.time_in_queue": q}) for q in (0.3, 0.1, 0.5)]
    graph.add(_request_spans(1, queued[0]))
    graph.add(_request_spans(2, queued[1]))
    graph.add(_request_spans(3, queued[2]))  # no span of this request marks it
    graph.add(_request_spans(1, ("router", 12, 11, {})))
    graph.add(_request_spans(2, ("router", 12, 11, {})))
    graph.add(_request_spans(1, ("gateway", 11, 0, {"http.request.header.x-priority": ["high"]})))
    graph.add(_request_spans(2, ("gateway", 11, 0, {"gen_ai.request.priority": 3})))
    urgent = _signal_sums(graph, "engine", Signal.QUEUE_TIME_URGENT)
    ordinary = _signal_sums(graph, "engine", Signal.QUEUE_TIME_ORDINARY)
    assert (urgent[SignalSum.COUNT], ordinary[SignalSum.COUNT]) == (1.0, 1.0)
    assert (urgent[SignalSum.SUM], ordinary[SignalSum.SUM]) == (0.3, 0.1)
    assert _signal_sums(graph, "engine", Signal.QUEUE_TIME)[SignalSum.COUNT] == 3.0
