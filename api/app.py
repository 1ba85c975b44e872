"""The HTTP API (FastAPI): health, the live service graph, and what later issues add."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from api.errors import safe_validation_errors
from api.feedback import feedback_router
from api.incident_graph import incident_graph_router
from api.incidents import incidents_router
from api.limits import DEFAULT_MAX_BODY_BYTES, limit_bodies
from api.metrics import ServiceMetrics, mount_metrics
from api.nodegraph import node_graph
from api.security import require_token
from api.timeparams import parse_time_ns
from api.ui import mount_ui
from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, default_window, graph_between
from rca.graph.writer import GraphWriter
from rca.incidents.feedback import FeedbackService
from rca.incidents.service import IncidentService


def _invalid(name: str, value: str | None, message: str) -> RequestValidationError:
    """A 422 in FastAPI's own shape (the one /openapi.json documents), naming the parameter."""
    return RequestValidationError([{"type": "value_error", "loc": ("query", name), "msg": message, "input": value}])


def _param(name: str, value: str) -> int:
    try:
        return parse_time_ns(value)
    except ValueError as exc:
        raise _invalid(name, value, f"query parameter {name!r}: {exc}") from None


def _window(graph: ServiceGraph, start: str | None, end: str | None) -> Window:
    default = default_window(graph)
    end_ns = _param("to", end) if end else default.end_ns
    start_ns = _param("from", start) if start else end_ns - (default.end_ns - default.start_ns)
    if end_ns <= start_ns:
        raise _invalid("to", end, "query parameter 'to' must be after 'from'")
    return Window(start_ns, end_ns)


def create_app(
    writer: GraphWriter,
    incidents: IncidentService | None = None,
    *,
    api_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    metrics: ServiceMetrics | None = None,
    feedback: FeedbackService | None = None,
) -> FastAPI:
    """The API; `api_token` puts bearer auth in front of all of it, `max_body_bytes` bounds every body,
    `feedback` adds the responders' labels (`POST /incidents/{id}/feedback`)."""
    app = FastAPI(title="rca", version="0.1.0", description="Causal root-cause inference over OpenTelemetry traces")
    limit_bodies(app, max_body_bytes)
    require_token(app, api_token)  # outermost: unauthenticated bodies are never read
    safe_validation_errors(app)
    if incidents is not None:
        app.include_router(incidents_router(incidents))
        app.include_router(incident_graph_router(incidents))
        mount_ui(app, incidents)
    if feedback is not None:
        app.include_router(feedback_router(feedback))
    if metrics is not None:
        mount_metrics(app, metrics)

    @app.get("/healthz", response_class=PlainTextResponse)
    def healthz() -> str:
        return "ok\n"

    @app.get("/readyz", response_class=PlainTextResponse)
    def readyz() -> str:
        return "ready\n"

    @app.get("/graph")
    def graph(
        start: str | None = Query(None, alias="from", description="RFC3339 or epoch ms"),
        end: str | None = Query(None, alias="to", description="RFC3339 or epoch ms"),
    ) -> JSONResponse:
        def render(g: ServiceGraph) -> dict[str, Any]:
            window = _window(g, start, end)
            return node_graph(graph_between(g, window), (window.end_ns - window.start_ns) / 1e9)

        return JSONResponse(writer.read(render))

    return app
