"""`GET /incidents/{id}/graph` and its flat `nodes` / `edges` arrays (for Grafana's Infinity data source)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from api.nodegraph import incident_edge_frame, incident_node_frame, incident_node_graph
from rca.incidents.causal_graph import IncidentGraph
from rca.incidents.service import IncidentService


def incident_graph_router(service: IncidentService) -> APIRouter:
    router = APIRouter(tags=["incidents"])

    def graph_of(incident_id: str) -> IncidentGraph:
        graph = service.graph(incident_id)
        if graph is None:
            raise HTTPException(404, detail=f"unknown incident {incident_id!r}")
        return graph

    @router.get("/incidents/{incident_id}/graph")
    def incident_graph(incident_id: str) -> dict[str, list[dict[str, Any]]]:
        """The incident's causal graph in Grafana Node Graph shape: candidates and their callers over
        the ranking window; `arc__cause` is each node's posterior, the top cause is highlighted and the
        causal path's edges are marked."""
        return incident_node_graph(graph_of(incident_id))

    @router.get("/incidents/{incident_id}/graph/nodes")
    def incident_graph_nodes(incident_id: str) -> list[dict[str, Any]]:
        return incident_node_frame(graph_of(incident_id))

    @router.get("/incidents/{incident_id}/graph/edges")
    def incident_graph_edges(incident_id: str) -> list[dict[str, Any]]:
        return incident_edge_frame(graph_of(incident_id))

    return router
