"""The incident API's wire shapes (docs/interface.md, HTTP API and Alerts): the Alertmanager webhook body in,
INCIDENT_SUMMARY / CAUSES out. Pydantic stops here: requests become core `Alert`s, and core types
become the interface's JSON in the `*_json` functions below, the one place that does so."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rca.incidents.model import IncidentCauses, IncidentDetail, IncidentSummary
from rca.ranking.causes import Cause, Ranking, SimultaneousRoot
from rca.ranking.pull import SPANS_OK, SourceStatus
from rca.telemetry.alerts import Alert, AlertStatus, fingerprint_of, format_rfc3339, parse_rfc3339_ns, service_of


def _rfc3339(value: str) -> str:
    parse_rfc3339_ns(value)  # raises ValueError, which names the field in the 422
    return value


class WebhookAlert(BaseModel):
    """One alert of Alertmanager's webhook v4."""

    model_config = ConfigDict(extra="allow")

    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: str
    endsAt: str | None = None
    generatorURL: str = ""
    fingerprint: str | None = Field(default=None, min_length=1, max_length=128)

    _starts = field_validator("startsAt")(_rfc3339)

    @field_validator("endsAt")
    @classmethod
    def _ends(cls, value: str | None) -> str | None:
        return None if value in (None, "") else _rfc3339(value)

    @field_validator("startsAt")
    @classmethod
    def _not_zero(cls, value: str) -> str:
        if parse_rfc3339_ns(value) is None:
            raise ValueError("startsAt must be a real time, not Go's zero time")
        return value

    def to_alert(self) -> Alert:
        starts = parse_rfc3339_ns(self.startsAt)
        assert starts is not None  # validated above
        return Alert(
            fingerprint=self.fingerprint or fingerprint_of(self.labels),
            status=AlertStatus(self.status),
            labels=dict(self.labels),
            annotations=dict(self.annotations),
            starts_at_ns=starts,
            ends_at_ns=parse_rfc3339_ns(self.endsAt) if self.endsAt else None,
            generator_url=self.generatorURL,
            service=service_of(self.labels),
        )


class WebhookBody(BaseModel):
    """Alertmanager's webhook v4 message; the group fields are informational."""

    model_config = ConfigDict(extra="allow")

    version: str = "4"
    groupKey: str = ""
    truncatedAlerts: int = 0
    status: Literal["firing", "resolved"] = "firing"
    receiver: str = ""
    groupLabels: dict[str, str] = Field(default_factory=dict)
    commonLabels: dict[str, str] = Field(default_factory=dict)
    commonAnnotations: dict[str, str] = Field(default_factory=dict)
    externalURL: str = ""
    alerts: list[WebhookAlert]

    def to_alerts(self) -> list[Alert]:
        return [a.to_alert() for a in self.alerts]


def cause_json(cause: Cause) -> dict[str, Any]:
    return {
        "rank": cause.rank,
        "node": cause.node,
        "service": cause.service,
        "fault": cause.fault.value,
        "probability": cause.probability,
        "evidence": [
            {"signal": e.signal, "observed": e.observed, "baseline": e.baseline, "score": e.score}
            for e in cause.evidence
        ],
        "path": list(cause.path),
    }


def simultaneous_json(root: SimultaneousRoot) -> dict[str, Any]:
    return {"node": root.node, "service": root.service, "fault": root.fault.value, "probability": root.probability}


def several_roots_json(ranking: Ranking | None) -> dict[str, Any]:
    """`{"simultaneous": [...]}` when several roots explain the evidence better than one, else `{}`:
    the interface's optional field is present only then."""
    if ranking is None or not ranking.simultaneous:
        return {}
    return {"simultaneous": [simultaneous_json(r) for r in ranking.simultaneous]}


def summary_json(summary: IncidentSummary) -> dict[str, Any]:
    incident = summary.incident
    return {
        "id": incident.id,
        "status": incident.status.value,
        "started_at": format_rfc3339(incident.started_at_ns),
        "alerts": incident.alerts,
        "services": list(incident.services),
        "causes": [cause_json(c) for c in summary.causes],
    }


def _alert_json(alert: Alert) -> dict[str, Any]:
    return {
        "fingerprint": alert.fingerprint,
        "status": alert.status.value,
        "service": alert.service,
        "labels": dict(alert.labels),
        "annotations": dict(alert.annotations),
        "startsAt": format_rfc3339(alert.starts_at_ns),
        "endsAt": None if alert.ends_at_ns is None else format_rfc3339(alert.ends_at_ns),
        "generatorURL": alert.generator_url,
    }


def _window_json(start_ns: int, end_ns: int) -> dict[str, str]:
    return {"start": format_rfc3339(start_ns), "end": format_rfc3339(end_ns)}


def detail_json(detail: IncidentDetail) -> dict[str, Any]:
    """The summary's fields, with `alerts` holding the alerts themselves (the count moves to
    `alert_count`), the window and the end."""
    incident = detail.summary.incident
    return {
        **summary_json(detail.summary),
        "alerts": [_alert_json(a) for a in detail.alerts],
        "alert_count": incident.alerts,
        "ended_at": None if incident.ended_at_ns is None else format_rfc3339(incident.ended_at_ns),
        "window": _window_json(detail.start_ns, detail.end_ns),
    }


def causes_json(causes: IncidentCauses) -> dict[str, Any]:
    ranking = causes.ranking
    return {
        "incident_id": causes.incident.id,
        "status": causes.incident.status.value,
        "window": _window_json(causes.start_ns, causes.end_ns),
        "model": {
            "name": ranking.model if ranking else "none",
            "inference_ms": ranking.inference_ms if ranking else 0.0,
        },
        "causes": [cause_json(c) for c in ranking.causes] if ranking else [],
        **several_roots_json(ranking),
        "sources": [{"name": s.name, "ok": s.ok, "detail": s.detail} for s in sources_of(ranking)],
    }


def sources_of(ranking: Ranking | None) -> tuple[SourceStatus, ...]:
    """The telemetry sources a ranking read; the spans rca receives are always one (rankings
    stored before sources were recorded read spans alone)."""
    return ranking.sources if ranking is not None and ranking.sources else (SPANS_OK,)
