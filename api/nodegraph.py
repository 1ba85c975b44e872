"""networkx graphs → Grafana Node Graph frames (`nodes` and `edges` with Grafana's field names):
the live service graph, and an incident's causal graph with each node's posterior as its arc."""

from __future__ import annotations

import math
from typing import Any

import networkx as nx

from rca.incidents.causal_graph import IncidentGraph

KIND_COLORS = {"service": "#5794f2", "virtual": "#8e8e8e", "resource": "#ff9830"}
CAUSE_COLOR = "#f2495c"  # the top cause, and the causal path's edges
PATH_COLOR = "#ff9830"  # nodes between the cause and the alert
ALERT_COLOR = "#b877d9"  # the alerting nodes
CANDIDATE_COLOR = "#5794f2"
CALLER_COLOR = "#8e8e8e"  # callers of candidates that are no candidates themselves
EDGE_COLOR = "#73bf69"


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3) if math.isfinite(seconds) else 0.0


def number_text(value: float) -> str:
    """A readable number: thousands separated above 1000, 3 significant digits below."""
    if not math.isfinite(value):
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def ms_text(seconds: float) -> str:
    return f"{number_text(seconds * 1000.0)} ms"


def rate_text(calls: float, seconds: float) -> str:
    return f"{number_text(calls / seconds)} calls/s"


def percent_text(share: float) -> str:
    return "<0.1 %" if 0.0 < share < 0.001 else f"{100.0 * share:.1f} %"


def signal_text(signal: str, value: float) -> str:
    """A signal's value with its unit, judged from its name (seconds → ms, ratios → %, bytes → MB)."""
    base = signal.split(":", 1)[0]
    if not math.isfinite(value):
        return "–"
    if base.endswith("_s") or "time" in base or "latency" in base:
        return ms_text(value)
    if any(word in base for word in ("utilization", "ratio", "usage", "rate")):
        return percent_text(value)
    if "bytes" in base:
        return f"{number_text(value / 1e6)} MB"
    return number_text(value)


def _error_rate(data: dict[str, Any]) -> float:
    return min(1.0, max(0.0, float(data.get("error_rate", 0.0))))


def node_frame(graph: nx.DiGraph, seconds: float) -> list[dict[str, Any]]:
    """One row per node: mainstat p95 latency, secondarystat calls/s, arcs error/ok summing to 1."""
    rows = []
    for name, data in sorted(graph.nodes(data=True)):
        error_rate = round(_error_rate(data), 6)
        rows.append(
            {
                "id": name,
                "title": name,
                "subtitle": f"{data.get('kind', 'service')} · {data.get('service', name)}",
                "mainstat": f"{ms_text(data.get('latency_p95_s', math.nan))} p95",
                "secondarystat": rate_text(data.get("calls", 0.0), seconds),
                "arc__errors": error_rate,
                "arc__ok": 1.0 - error_rate,
                "detail__kind": data.get("kind", "service"),
                "detail__service": data.get("service", name),
                "detail__calls": data.get("calls", 0.0),
                "detail__errors": data.get("errors", 0.0),
                "detail__error_rate": percent_text(error_rate),
                "detail__self_time_mean_ms": _ms(data.get("self_time_mean_s", 0.0)),
                "detail__latency_p50_ms": _ms(data.get("latency_p50_s", math.nan)),
                "detail__log_records": data.get("log_records", 0.0),
                "detail__log_errors": data.get("log_errors", 0.0),
                "color": KIND_COLORS.get(str(data.get("kind")), KIND_COLORS["service"]),
                "highlighted": False,
            }
        )
    return rows


def _thickness(calls: float, busiest: float) -> float:
    return round(1.0 + 3.0 * calls / busiest, 3)


def edge_frame(graph: nx.DiGraph, seconds: float) -> list[dict[str, Any]]:
    """One row per caller → callee edge: mainstat calls/s, secondarystat p95 latency."""
    rows = []
    busiest = max((d.get("calls", 0.0) for _, _, d in graph.edges(data=True)), default=1.0) or 1.0
    for source, target, data in sorted(graph.edges(data=True)):
        calls = float(data.get("calls", 0.0))
        rows.append(
            {
                "id": f"{source}->{target}",
                "source": source,
                "target": target,
                "mainstat": rate_text(calls, seconds),
                "secondarystat": f"{ms_text(data.get('latency_p95_s', math.nan))} p95",
                "thickness": _thickness(calls, busiest),
                "color": CAUSE_COLOR if _error_rate(data) > 0.05 else EDGE_COLOR,
                "highlighted": False,
                "detail__error_rate": percent_text(_error_rate(data)),
                "detail__virtual": bool(data.get("virtual", False)),
            }
        )
    return rows


def node_graph(graph: nx.DiGraph, seconds: float) -> dict[str, list[dict[str, Any]]]:
    """The live service graph over a window of `seconds`."""
    return {"nodes": node_frame(graph, seconds), "edges": edge_frame(graph, seconds)}


def _role(node: str, rank: int | None, top_path: tuple[str, ...], alerts: tuple[str, ...]) -> tuple[str, str]:
    """What the node is to the incident, and its color."""
    if rank == 1:
        return "top cause", CAUSE_COLOR
    if node in alerts:
        return "alerting", ALERT_COLOR
    if node in top_path:
        return "on the causal path", PATH_COLOR
    if rank is not None:
        return f"candidate #{rank}", CANDIDATE_COLOR
    return "caller", CALLER_COLOR


def incident_node_frame(incident: IncidentGraph) -> list[dict[str, Any]]:
    """One row per node: mainstat the posterior, arc__cause / arc__other the posterior and the rest."""
    ranking = incident.causes.ranking
    causes = {c.node: c for c in ranking.causes} if ranking else {}
    top_path = incident.top_path()
    rows = []
    for name, data in sorted(incident.graph.nodes(data=True)):
        cause = causes.get(name)
        probability = min(1.0, max(0.0, cause.probability)) if cause else 0.0
        role, color = _role(name, cause.rank if cause else None, top_path, incident.alert_nodes)
        evidence = cause.evidence[0] if cause and cause.evidence else None  # its own class's signal
        rows.append(
            {
                "id": name,
                "title": name,
                "subtitle": f"#{cause.rank} {cause.fault.value}" if cause else role,
                "mainstat": f"{percent_text(probability)} cause",
                "secondarystat": f"{ms_text(data.get('latency_p95_s', math.nan))} p95",
                "arc__cause": probability,
                "arc__other": 1.0 - probability,
                "detail__role": role,
                "detail__probability": percent_text(probability),
                "detail__fault": cause.fault.value if cause else "",
                "detail__service": cause.service if cause else data.get("service", name),
                "detail__kind": data.get("kind", ""),
                "detail__rate": rate_text(data.get("calls", 0.0), incident.seconds),
                "detail__error_rate": percent_text(_error_rate(data)),
                "detail__evidence": (
                    f"{evidence.signal}: {signal_text(evidence.signal, evidence.baseline)}"
                    f" → {signal_text(evidence.signal, evidence.observed)}"
                    if evidence
                    else ""
                ),
                "detail__causal_path": name in top_path,
                "color": color,
                "highlighted": bool(cause and cause.rank == 1),
            }
        )
    return rows


def incident_edge_frame(incident: IncidentGraph) -> list[dict[str, Any]]:
    """One row per caller → callee edge; the top cause's path is thick, red and highlighted."""
    graph, path = incident.graph, incident.path_edges()
    busiest = max((d.get("calls", 0.0) for _, _, d in graph.edges(data=True)), default=1.0) or 1.0
    rows = []
    for source, target, data in sorted(graph.edges(data=True)):
        calls = float(data.get("calls", 0.0))
        on_path = (source, target) in path
        rows.append(
            {
                "id": f"{source}->{target}",
                "source": source,
                "target": target,
                "mainstat": rate_text(calls, incident.seconds),
                "secondarystat": f"{ms_text(data.get('latency_p95_s', math.nan))} p95",
                "thickness": 6.0 if on_path else _thickness(calls, busiest),
                "color": CAUSE_COLOR if on_path else CALLER_COLOR,
                "highlighted": on_path,
                "detail__causal_path": on_path,
                "detail__error_rate": percent_text(_error_rate(data)),
            }
        )
    return rows


def incident_node_graph(incident: IncidentGraph) -> dict[str, list[dict[str, Any]]]:
    return {"nodes": incident_node_frame(incident), "edges": incident_edge_frame(incident)}
