"""Human pages: `GET /ui/incidents` (the list) and `GET /ui/incidents/{id}` (the causal graph drawn
layered as inline SVG, the ranked causes, each cause's evidence against its baseline). Server-side
Jinja2; the CSS and JS ship in the package (`api/static`), nothing is fetched from elsewhere."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, PackageLoader, select_autoescape

from api.layout import Box, layered_layout
from api.nodegraph import incident_node_frame, percent_text, signal_text
from rca.incidents.causal_graph import IncidentGraph
from rca.incidents.model import IncidentStatus
from rca.incidents.service import IncidentService
from rca.ranking.causes import Cause, Evidence
from rca.telemetry.alerts import format_rfc3339

STATIC = Path(__file__).parent / "static"
GRAPH_NODES = 80  # at most this many nodes drawn (the top path and alerting nodes always are)
TABLE_CAUSES = 25  # causes listed with their evidence
_env = Environment(loader=PackageLoader("api", "templates"), autoescape=select_autoescape(), trim_blocks=True)


@dataclass(frozen=True, slots=True)
class NodeView:
    id: str
    box: Box
    label: str
    sub: str
    color: str
    probability: float
    highlighted: bool
    tooltip: str


@dataclass(frozen=True, slots=True)
class EdgeView:
    d: str  # the SVG path
    on_path: bool
    tooltip: str


@dataclass(frozen=True, slots=True)
class EvidenceView:
    signal: str
    baseline: str
    observed: str
    change: str
    score: str
    baseline_share: float  # bar lengths, of the larger of the two
    observed_share: float


def _evidence_view(e: Evidence) -> EvidenceView:
    top = max(abs(e.baseline), abs(e.observed)) or 1.0
    change = f"×{e.observed / e.baseline:.3g}" if e.baseline else ("–" if e.observed == 0 else "from 0")
    return EvidenceView(
        signal=e.signal,
        baseline=signal_text(e.signal, e.baseline),
        observed=signal_text(e.signal, e.observed),
        change=change,
        score=f"{e.score:.3g}",
        baseline_share=abs(e.baseline) / top,
        observed_share=abs(e.observed) / top,
    )


def _short(name: str, limit: int = 22) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _curve(start: tuple[float, float], end: tuple[float, float]) -> str:
    (x1, y1), (x2, y2) = start, end
    bend = max(abs(y2 - y1) / 2, 30.0)
    return f"M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} {x2:.1f},{y2:.1f}"


def _drawing(incident: IncidentGraph) -> tuple[list[NodeView], list[EdgeView], float, float]:
    layout = layered_layout(incident.graph)
    path = incident.path_edges()
    nodes = [
        NodeView(
            id=row["id"],
            box=layout.boxes[row["id"]],
            label=_short(row["id"]),
            sub=_short(f"{row['detail__probability']} · {row['detail__fault'] or row['detail__role']}", 25),
            color=row["color"],
            probability=row["arc__cause"],
            highlighted=row["highlighted"],
            tooltip=f"{row['id']} ({row['detail__role']}): {row['detail__probability']} · {row['detail__rate']}",
        )
        for row in incident_node_frame(incident)
    ]
    edges = sorted(
        (
            EdgeView(
                d=_curve(layout.boxes[a].bottom, layout.boxes[b].top),
                on_path=(a, b) in path,
                tooltip=f"{a} → {b}",
            )
            for a, b in incident.graph.edges
        ),
        key=lambda e: e.on_path,  # the causal path drawn over the rest
    )
    return nodes, edges, layout.width, layout.height


def _render(template: str, **context: object) -> HTMLResponse:
    return HTMLResponse(_env.get_template(template).render(**context))


def _incident_page(incident: IncidentGraph) -> HTMLResponse:
    causes = incident.causes
    ranking = causes.ranking
    listed: tuple[Cause, ...] = ranking.causes[:TABLE_CAUSES] if ranking else ()
    rest = ranking.causes[TABLE_CAUSES:] if ranking else ()
    nodes, edges, width, height = _drawing(incident)
    return _render(
        "incident.html",
        incident=causes.incident,
        started=format_rfc3339(causes.incident.started_at_ns),
        window=(format_rfc3339(causes.start_ns), format_rfc3339(causes.end_ns)),
        ranking=ranking,
        causes=[(c, percent_text(c.probability), [_evidence_view(e) for e in c.evidence]) for c in listed],
        rest=(len(rest), percent_text(sum(c.probability for c in rest))),
        top=listed[0] if listed else None,
        top_probability=percent_text(listed[0].probability) if listed else "",
        alert_nodes=incident.alert_nodes,
        nodes=nodes,
        edges=edges,
        width=width,
        height=height,
        drawn=incident.graph.number_of_nodes(),
    )


def ui_router(service: IncidentService) -> APIRouter:
    router = APIRouter(prefix="/ui", tags=["ui"])

    @router.get("/incidents", response_class=HTMLResponse)
    def incidents_page(
        status: Literal["open", "resolved"] | None = Query(None, description="only incidents in this state"),
        service_name: str | None = Query(None, alias="service", description="only incidents touching this service"),
        limit: int = Query(200, ge=1, le=1000),
    ) -> HTMLResponse:
        """The incidents, newest first, with their most probable cause."""
        summaries = service.incidents(IncidentStatus(status) if status else None, limit)
        if service_name:
            summaries = [
                s
                for s in summaries
                if service_name in s.incident.services or any(service_name in (c.node, c.service) for c in s.causes)
            ]
        rows = [(s, format_rfc3339(s.incident.started_at_ns), s.causes[0] if s.causes else None) for s in summaries]
        return _render("incidents.html", rows=rows, status=status, service=service_name, percent=percent_text)

    @router.get("/incidents/{incident_id}", response_class=HTMLResponse)
    def incident_page(incident_id: str) -> HTMLResponse:
        """One incident: its causal graph drawn, the ranked causes and their evidence."""
        graph = service.graph(incident_id, max_nodes=GRAPH_NODES)
        if graph is None:
            raise HTTPException(404, detail=f"unknown incident {incident_id!r}")
        return _incident_page(graph)

    return router


def mount_ui(app: FastAPI, service: IncidentService) -> None:
    """The pages and their packaged assets (`/ui/static`)."""
    app.include_router(ui_router(service))
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
