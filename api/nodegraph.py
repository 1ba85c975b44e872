"""networkx graph → Grafana Node Graph frames (`nodes` and `edges` with Grafana's field names)."""

from __future__ import annotations

import math
from typing import Any

import networkx as nx

KIND_COLORS = {"service": "#5794f2", "virtual": "#8e8e8e", "resource": "#ff9830"}


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3) if math.isfinite(seconds) else 0.0


def node_frame(graph: nx.DiGraph) -> list[dict[str, Any]]:
    """One row per node: mainstat latency, secondarystat calls, arcs error/ok summing to 1."""
    rows = []
    for name, data in sorted(graph.nodes(data=True)):
        error_rate = min(1.0, max(0.0, float(data.get("error_rate", 0.0))))
        rows.append(
            {
                "id": name,
                "title": name,
                "subtitle": f"{data.get('kind', 'service')} · {data.get('service', name)}",
                "mainstat": f"{_ms(data.get('latency_p95_s', math.nan))} ms p95",
                "secondarystat": f"{data.get('calls', 0.0):.0f} calls",
                "arc__errors": round(error_rate, 6),
                "arc__ok": round(1.0 - error_rate, 6),
                "detail__kind": data.get("kind", "service"),
                "detail__service": data.get("service", name),
                "detail__calls": data.get("calls", 0.0),
                "detail__errors": data.get("errors", 0.0),
                "detail__self_time_mean_ms": _ms(data.get("self_time_mean_s", 0.0)),
                "detail__latency_p50_ms": _ms(data.get("latency_p50_s", math.nan)),
                "color": KIND_COLORS.get(str(data.get("kind")), KIND_COLORS["service"]),
            }
        )
    return rows


def edge_frame(graph: nx.DiGraph) -> list[dict[str, Any]]:
    """One row per caller → callee edge: mainstat calls, secondarystat p95 latency."""
    rows = []
    busiest = max((d.get("calls", 0.0) for _, _, d in graph.edges(data=True)), default=1.0) or 1.0
    for source, target, data in sorted(graph.edges(data=True)):
        calls = float(data.get("calls", 0.0))
        rows.append(
            {
                "id": f"{source}->{target}",
                "source": source,
                "target": target,
                "mainstat": f"{calls:.0f} calls",
                "secondarystat": f"{_ms(data.get('latency_p95_s', math.nan))} ms p95",
                "thickness": round(1.0 + 4.0 * calls / busiest, 3),
                "color": "#f2495c" if data.get("error_rate", 0.0) > 0.05 else "#73bf69",
                "detail__error_rate": round(float(data.get("error_rate", 0.0)), 6),
                "detail__virtual": bool(data.get("virtual", False)),
            }
        )
    return rows


def node_graph(graph: nx.DiGraph) -> dict[str, list[dict[str, Any]]]:
    return {"nodes": node_frame(graph), "edges": edge_frame(graph)}
