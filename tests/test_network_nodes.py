"""Client calls' self time is network time: it lands on a network node per callee, reported as the callee."""

from __future__ import annotations

import numpy as np

from models.ranker import BayesianRanker
from rca.evidence.nodes import extract_evidence
from rca.graph.accumulators import EdgeSum
from rca.graph.service_graph import ServiceGraph
from tests.spanfactory import T0, batch

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
