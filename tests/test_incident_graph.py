"""An incident's causal graph in Grafana Node Graph shape, and its layered drawing, from a ranking
of simulated spans (in process: the HTTP routes run in tests/test_grafana_dashboard.py)."""

from __future__ import annotations

import itertools
from functools import cache

import networkx as nx
import pytest

from api.layout import layered_layout
from api.nodegraph import incident_edge_frame, incident_node_frame, node_graph
from models.ranker import BayesianRanker
from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, graph_between
from rca.incidents.causal_graph import IncidentGraph, causal_subgraph
from rca.incidents.model import Incident, IncidentCauses, IncidentStatus
from rca.telemetry.alerts import parse_rfc3339_ns
from simulation import simulate

NODE_FIELDS = {"id", "title", "subtitle", "mainstat", "secondarystat", "color", "highlighted"}
EDGE_FIELDS = {"id", "source", "target", "mainstat", "secondarystat", "thickness", "color"}
LOOKBACK_NS = 300 * 1_000_000_000
Built = tuple[IncidentGraph, str, nx.DiGraph]  # the incident's graph, the true root, the window's graph


@cache
def _incident(scenario: str, rate: float) -> Built:
    # seed 1 draws a subtle fault (x2.35) that reads as its compute latency at this rate
    case = simulate(scenario, seed=2, rate=rate)
    first = min(parse_rfc3339_ns(str(a["startsAt"])) or 0 for w in case.webhooks for a in w["alerts"])  # type: ignore[attr-defined]
    graph = ServiceGraph(retention_seconds=3600.0)
    for batch in case.batches:
        graph.add(batch.select(batch.start_ns < first + 60 * 1_000_000_000))
    alerts = case.truth.alert_services
    start, end = first - LOOKBACK_NS, first + 60 * 1_000_000_000
    ranking = BayesianRanker().rank(graph, alert_nodes=alerts, start_ns=start, end_ns=end)
    incident = Incident("inc-test", IncidentStatus.OPEN, first, None, len(alerts), alerts)
    causes = IncidentCauses(incident, start, end, ranking)
    window = graph_between(graph, Window(start, end))
    return IncidentGraph(causes, alerts, causal_subgraph(window, causes, alerts)), case.truth.node, window


GPU_BANDWIDTH_SIGNALS = {"gpu_dram_utilization", "dram_bytes_per_output_token"}


@pytest.fixture(scope="module")
def llm() -> Built:
    return _incident("llm-gpu_memory_bandwidth", 1.0)


def test_nodes_carry_grafana_fields_and_the_posterior_as_arc(llm: Built) -> None:
    incident, truth, _ = llm
    nodes = incident_node_frame(incident)
    assert {n["id"] for n in nodes} == set(incident.graph.nodes)
    for node in nodes:
        assert node.keys() >= NODE_FIELDS
        arcs = [v for k, v in node.items() if k.startswith("arc__")]
        assert len(arcs) == 2 and abs(sum(arcs) - 1.0) < 1e-9
        assert all(k in NODE_FIELDS or k.startswith(("arc__", "detail__")) for k in node)
        assert node["mainstat"].endswith("% cause") and node["secondarystat"].endswith("ms p95")
        assert node["detail__rate"].endswith("calls/s")
    assert sum(n["arc__cause"] for n in nodes) == pytest.approx(1.0, abs=1e-6)  # every candidate is drawn
    (top,) = [n for n in nodes if n["highlighted"]]
    assert top["id"] == truth and top["arc__cause"] > 0.5 and top["color"] == "#f2495c"
    assert top["detail__role"] == "top cause" and top["detail__fault"] == "gpu_memory_bandwidth"
    signal, levels = top["detail__evidence"].split(": ", 1)  # the top class's own signal, baseline → observed
    assert signal in GPU_BANDWIDTH_SIGNALS and " → " in levels


def test_causal_path_is_marked_on_its_edges(llm: Built) -> None:
    incident, truth, _ = llm
    path = incident.top_path()
    assert path[0] == truth and path[-1] in incident.alert_nodes
    edges = incident_edge_frame(incident)
    marked = {(e["source"], e["target"]) for e in edges if e["detail__causal_path"]}
    assert marked == {(caller, callee) for callee, caller in itertools.pairwise(path)}
    for edge in edges:
        assert edge.keys() >= EDGE_FIELDS and edge["mainstat"].endswith("calls/s")
        assert edge["highlighted"] == edge["detail__causal_path"]
        assert (edge["color"] == "#f2495c") == edge["detail__causal_path"]
    thickest = max(e["thickness"] for e in edges if not e["detail__causal_path"])
    assert all(e["thickness"] > thickest for e in edges if e["detail__causal_path"])


def test_live_graph_arcs_sum_to_one_and_rates_carry_units(llm: Built) -> None:
    _, _, window = llm
    frames = node_graph(window, 360.0)
    for node in frames["nodes"]:
        assert node["arc__errors"] + node["arc__ok"] == pytest.approx(1.0)
        assert node["secondarystat"].endswith("calls/s") and node["mainstat"].endswith("ms p95")
    assert all(e.keys() >= EDGE_FIELDS for e in frames["edges"])


def test_path_is_kept_when_the_window_lost_the_spans(llm: Built) -> None:
    incident, truth, _ = llm
    bare = causal_subgraph(nx.DiGraph(), incident.causes, incident.alert_nodes)
    path = incident.top_path()
    assert truth in bare and all(bare.has_edge(b, a) for a, b in itertools.pairwise(path))
    capped = causal_subgraph(incident.graph, incident.causes, incident.alert_nodes, max_nodes=8)
    assert set(path) <= set(capped.nodes) and capped.number_of_nodes() <= max(8, len(path) + 2)


def test_layered_layout_puts_callers_above_callees_and_stays_readable_at_50_nodes() -> None:
    incident, _, _ = _incident("mesh200-latency", 2.0)
    graph = incident.graph
    assert graph.number_of_nodes() >= 50
    layout = layered_layout(graph)
    boxes = layout.boxes
    assert set(boxes) == set(graph.nodes)
    acyclic = [(a, b) for a, b in graph.edges if not nx.has_path(graph, b, a)]
    assert all(boxes[a].y < boxes[b].y for a, b in acyclic)  # callers above callees
    placed = sorted((b.y, b.x) for b in boxes.values())
    for (y1, x1), (y2, x2) in itertools.pairwise(placed):
        assert y1 != y2 or x2 - x1 >= next(iter(boxes.values())).width  # no overlaps within a row
    per_row = max(sum(1 for b in boxes.values() if b.y == y) for y in {b.y for b in boxes.values()})
    assert per_row <= 8 and layout.width <= 1400  # labels keep their size when the page fits the graph
