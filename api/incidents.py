"""The Alertmanager webhook and the incident endpoints (docs/interface.md, HTTP API)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Query

from api.schemas import WebhookBody, causes_json, detail_json, summary_json
from rca.incidents.model import IncidentStatus
from rca.incidents.service import IncidentService


def _unknown(incident_id: str) -> HTTPException:
    return HTTPException(404, detail=f"unknown incident {incident_id!r}")


def incidents_router(service: IncidentService) -> APIRouter:
    router = APIRouter()

    @router.post("/webhooks/alertmanager", tags=["alerts"])
    def webhook(body: WebhookBody) -> dict[str, Any]:
        """Alertmanager webhook v4: stores the alerts (durably, before answering), clusters them
        into incidents and answers with the incidents touched and their top causes."""
        return {"incidents": [summary_json(s) for s in service.handle(body.to_alerts())]}

    @router.get("/incidents", tags=["incidents"])
    def list_incidents(
        status: Literal["open", "resolved"] | None = Query(None, description="only incidents in this state"),
        limit: int = Query(100, ge=1, le=1000, description="at most this many, newest first"),
    ) -> dict[str, Any]:
        chosen = IncidentStatus(status) if status else None
        return {"incidents": [summary_json(s) for s in service.incidents(chosen, limit)]}

    @router.get("/incidents/{incident_id}", tags=["incidents"])
    def get_incident(incident_id: str) -> dict[str, Any]:
        detail = service.incident(incident_id)
        if detail is None:
            raise _unknown(incident_id)
        return detail_json(detail)

    @router.get("/incidents/{incident_id}/causes", tags=["incidents"])
    def get_causes(incident_id: str) -> dict[str, Any]:
        causes = service.causes(incident_id)
        if causes is None:
            raise _unknown(incident_id)
        return causes_json(causes)

    return router
