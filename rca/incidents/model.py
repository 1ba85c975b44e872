"""Incidents: alerts grouped as one fault, their window, and what the API shows of them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

from rca.ranking.causes import Cause, Ranking
from rca.telemetry.alerts import Alert


class IncidentStatus(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class Incident:
    """An incident as stored: resolved once every one of its alerts is."""

    id: str
    status: IncidentStatus
    started_at_ns: int  # the earliest alert's startsAt
    ended_at_ns: int | None  # the last alert's endsAt, once resolved
    alerts: int
    services: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AlertPlacement:
    """An alert and the incident it was placed in."""

    alert: Alert
    incident_id: str


@dataclass(frozen=True, slots=True)
class StoredRanking:
    """The latest ranking of an incident and the alerting nodes it was asked about."""

    ranking: Ranking
    alert_nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IncidentSummary:
    incident: Incident
    causes: tuple[Cause, ...]  # the top few


@dataclass(frozen=True, slots=True)
class IncidentDetail:
    summary: IncidentSummary
    alerts: tuple[Alert, ...]
    start_ns: int
    end_ns: int


@dataclass(frozen=True, slots=True)
class IncidentCauses:
    incident: Incident
    start_ns: int
    end_ns: int
    ranking: Ranking | None  # None until a ranking succeeded


def incident_id(founder: Alert) -> str:
    """A stable id from the alert that opened the incident (the same alert never opens two)."""
    digest = hashlib.sha256(f"{founder.fingerprint}\n{founder.starts_at_ns}".encode()).hexdigest()
    return f"inc-{digest[:16]}"


def incident_window(incident: Incident, *, newest_ns: int, lookback_ns: int) -> tuple[int, int]:
    """[earliest startsAt - look-back, now) where now is event time: one past the graph's newest
    span, capped at the incident's end once resolved; never empty."""
    start = incident.started_at_ns - lookback_ns
    end = newest_ns + 1
    if incident.ended_at_ns is not None:
        end = min(end, incident.ended_at_ns)
    return start, max(end, start + 1)
