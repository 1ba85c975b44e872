"""Client calls' self time is network time: it lands on a network node per callee, reported as the callee."""

from __future__ import annotations

import numpy as np

from models.ranker import BayesianRanker
from rca.evidence.nodes import FAULTS, extract_evidence
from rca.graph.accumulators import EdgeSum
from rca.graph.keys import low
from rca.graph.names import NodeKind
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.faults import Fault
from rca.telemetry.spans import KIND_CLIENT, KIND_SERVER
from tests.spanfactory import T0, batch, evidence_of_last_minutes, sid, tid

WINDOW_MS = 10_000


def _traffic(slow_wire_to: str | None, starved_caller: bool) -> ServiceGraph:
    """frontend serves `GET /`, calling b and c through one generic client operation (`HTTP GET`),
    each call with one server child; 20 windows, the last 6 faulty. A delay at a callee lengthens
    only the client calls into it; a starved frontend is slow in its own work and in every client call."""
    graph = ServiceGraph(retention_seconds=3600.0)
    rng = np.random.default_rng(5)
    spans = []
    span_id = 1
    for window in range(20):
        faulty = window >= 14
        for k in range(40):
            start = window * WINDOW_MS + k * 200
            root, elapsed = span_id, 2 + (30 if faulty and starved_caller else 0)  # the frontend's own work
            for callee, offset in (("b", 1), ("c", 2)):
                wire = int(rng.integers(1, 3)) + (40 if faulty and (starved_caller or slow_wire_to == callee) else 0)
                client, server = span_id + 2 * offset, span_id + 2 * offset + 1
                spans.append(("frontend", "HTTP GET", client, root, start + elapsed, 8 + wire))
                spans.append((callee, "GET /item", server, client, start + elapsed, 8))
                elapsed += 8 + wire
            spans.append(("frontend", "GET /", root, 0, start, elapsed))
            span_id += 10
    graph.add(batch(*spans))
    return graph


def _top(graph: ServiceGraph) -> tuple[str, str, str]:
    end = T0 + 20 * WINDOW_MS * 1_000_000
    ranking = BayesianRanker().rank(graph, alert_nodes=["frontend"], start_ns=end - 300 * 10**9, end_ns=end)
    top = ranking.causes[0]
    return top.node, top.evidence[0].signal, str(top.fault)


def test_the_graph_records_each_calls_time_outside_its_child() -> None:
    graph = ServiceGraph()
    graph.add(batch(("a", "HTTP GET", 1, 0, 0, 50), ("b", "GET /item", 2, 1, 5, 30)))
    _, sums, _ = graph.aggregate(T0, T0 + 10**10).edges.view()
    assert sums[:, EdgeSum.CALLS].tolist() == [1.0]
    assert abs(sums[0, EdgeSum.GAP] - 0.020) < 1e-6  # 50 ms less the child's 30 ms


def _deadline_calls(builder: SpanBatchBuilder, trace: int, start_ms: int, item_ms: int, timed_out: bool) -> None:
    """frontend's `GET /` calls b's `GET /item` through a client span; a timed-out attempt (the
    client's 30 ms deadline passed, its span failed, the callee went on) is retried once."""
    ms = 1_000_000
    t, at = tid(trace), T0 + start_ms * ms
    attempts = [(30, True), (item_ms + 2, False)] if timed_out else [(item_ms + 2, False)]
    root, elapsed = sid(trace * 10), 0
    for k, (client_ms, failed) in enumerate(attempts):
        client, server = sid(trace * 10 + 2 * k + 1), sid(trace * 10 + 2 * k + 2)
        begin = at + (1 + elapsed) * ms
        builder.add(t, client, root, "frontend", "HTTP GET", KIND_CLIENT, begin, begin + client_ms * ms, failed, {}, {})
        answered = begin + (1 + item_ms) * ms
        builder.add(t, server, client, "b", "GET /item", KIND_SERVER, begin + ms, answered, False, {}, {})
        elapsed += client_ms
    builder.add(t, root, b"", "frontend", "GET /", KIND_SERVER, at, at + (elapsed + 2) * ms, False, {}, {})


def test_a_client_that_gave_up_before_its_callee_answered_adds_no_network_time() -> None:
    # the client gave up at its 30 ms deadline, its callee went on for 80 ms; the retry was answered
    builder = SpanBatchBuilder()
    _deadline_calls(builder, 1, 0, 80, timed_out=True)
    graph = ServiceGraph()
    graph.add(builder.build().batch)
    keys, sums, _ = graph.aggregate(T0, T0 + 10**10).edges.view()
    b = graph.names.node("b", NodeKind.SERVICE)
    (row,) = np.flatnonzero(graph.names.nodeop_node[low(keys)] == b)  # the client operation -> b
    assert sums[row, EdgeSum.GAVE_UP] == 1.0  # of two attempts, the timed-out one
    assert abs(sums[row, EdgeSum.GAP] - 0.002) < 1e-6  # the answered one's 2 ms; not the other's -50 ms


def test_calls_a_client_gave_up_on_are_its_callees_slowness_not_its_own_errors() -> None:
    # b slows from 8 to 60 ms in the last 6 of 20 windows; frontend's calls to it time out and retry
    builder = SpanBatchBuilder()
    for window in range(20):
        for k in range(40):
            trace = window * 100 + k + 1
            _deadline_calls(builder, trace, window * WINDOW_MS + k * 200, 60 if window >= 14 else 8, window >= 14)
    ev = evidence_of_last_minutes(builder, T0 + 20 * WINDOW_MS * 1_000_000)
    errors, latency = FAULTS.index(Fault.ERRORS), FAULTS.index(Fault.LATENCY)
    assert ev.score[ev.index("b"), latency] > 5.0
    assert not np.nan_to_num(ev.score[ev.index("frontend"), errors]) > 0.0


def test_a_delay_into_one_callee_points_to_that_callee_not_its_caller() -> None:
    node, signal, fault = _top(_traffic(slow_wire_to="c", starved_caller=False))
    assert (node, fault) == ("c", "latency")
    assert signal == "network_time_s:frontend:HTTP GET -> c"


def test_a_caller_slow_in_all_its_client_calls_is_the_cause_itself() -> None:
    node, _, fault = _top(_traffic(slow_wire_to=None, starved_caller=True))
    assert (node, fault) == ("frontend", "latency")


def test_quiet_network_nodes_are_left_out_unless_fitting_asks_for_every_one() -> None:
    graph = _traffic(slow_wire_to="c", starved_caller=False)
    end = T0 + 20 * WINDOW_MS * 1_000_000
    start = end - 300 * 10**9
    served = extract_evidence(graph, start_ns=start, end_ns=end)
    fitting = extract_evidence(graph, start_ns=start, end_ns=end, network_min_score=0.0)
    assert [n for n, net in zip(served.nodes, served.network, strict=True) if net] == ["c (network)"]
    assert sorted(n for n, net in zip(fitting.nodes, fitting.network, strict=True) if net) == [
        "b (network)",
        "c (network)",
    ]
