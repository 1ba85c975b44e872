"""Responders' feedback on an incident (docs/interface.md, HTTP API: `POST /incidents/{id}/feedback`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from rca.incidents.feedback import FeedbackService
from rca.incidents.labels import LabelledIncident
from rca.telemetry.alerts import format_rfc3339
from rca.telemetry.faults import Fault

MAX_NOTE = 10_000


class FeedbackBody(BaseModel):
    """What the responder found to be the root cause; `fault` is null when only the node is known."""

    model_config = ConfigDict(extra="forbid")

    node: str = Field(min_length=1, max_length=512, description="the graph node (as CAUSE.node names it)")
    fault: Fault | None = Field(description="a FAULT, or null: the node only")
    note: str = Field("", max_length=MAX_NOTE)


def label_json(labelled: LabelledIncident) -> dict[str, Any]:
    """The stored label, the window its snapshot covers, and whether the model saw the node
    (`rca fit` learns only from labels whose node it saw)."""
    label, snapshot = labelled.label, labelled.snapshot
    return {
        "incident_id": label.incident_id,
        "node": label.node,
        "fault": None if label.fault is None else label.fault.value,
        "note": label.note,
        "created_at": format_rfc3339(label.created_at_ns),
        "window": {"start": format_rfc3339(snapshot.start_ns), "end": format_rfc3339(snapshot.end_ns)},
        "in_evidence": labelled.in_evidence,
    }


def feedback_router(service: FeedbackService) -> APIRouter:
    router = APIRouter()

    @router.post("/incidents/{incident_id}/feedback", tags=["incidents"])
    def post_feedback(incident_id: str, body: FeedbackBody) -> dict[str, Any]:
        """Labels the incident's root cause (a later label replaces this one). The ranking is
        unchanged; `rca fit` learns from the label and the evidence stored with it."""
        labelled = service.record(incident_id, node=body.node, fault=body.fault, note=body.note)
        if labelled is None:
            raise HTTPException(404, detail=f"unknown incident {incident_id!r}")
        return label_json(labelled)

    @router.get("/incidents/{incident_id}/feedback", tags=["incidents"])
    def get_feedback(incident_id: str) -> dict[str, Any]:
        """The incident's label; 404 when it has none (or there is no such incident)."""
        labelled = service.label(incident_id)
        if labelled is None:
            raise HTTPException(404, detail=f"incident {incident_id!r} has no feedback")
        return label_json(labelled)

    return router
