"""Incidents, their alerts, their latest ranking and responders' labels in a database
(SQLAlchemy Core; the tables and the migration are `storage.schema`).

SQLite is embedded by default (WAL, synchronous commits); a postgresql:// URL runs the same code
on PostgreSQL. Every write is one transaction, committed before the method returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, func, select, tuple_

from rca.incidents.labels import Label, LabelledIncident, Snapshot
from rca.incidents.model import AlertPlacement, Incident, IncidentStatus, StoredRanking
from rca.telemetry.alerts import Alert, AlertStatus
from rca.telemetry.faults import Fault
from storage.evidence_codec import evidence_from_json, evidence_to_json
from storage.ranking_codec import ranking_from_bytes, ranking_to_bytes
from storage.schema import StoreError, alerts, incidents, labels, metadata, open_engine, rankings

__all__ = ["SqlIncidentStore", "StoreError", "metadata", "open_engine"]


def _alert(row: Any) -> Alert:
    return Alert(
        fingerprint=row.fingerprint,
        status=AlertStatus(row.status),
        labels=dict(row.labels),
        annotations=dict(row.annotations),
        starts_at_ns=row.starts_at_ns,
        ends_at_ns=row.ends_at_ns,
        generator_url=row.generator_url,
        service=row.service,
    )


def _incident(row: Any) -> Incident:
    return Incident(
        id=row.id,
        status=IncidentStatus(row.status),
        started_at_ns=row.started_at_ns,
        ended_at_ns=row.ended_at_ns,
        alerts=row.alert_count,
        services=tuple(row.services),
    )


class SqlIncidentStore:
    """Reads and transactional writes of incidents, alerts and rankings (`rca.incidents.store.IncidentStore`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str, *, create: bool = True) -> SqlIncidentStore:
        """The store at `url` (`open_engine`: with `create` false a missing SQLite file is an error)."""
        return cls(open_engine(url, create=create))

    def close(self) -> None:
        self.engine.dispose()

    # -- alerts -----------------------------------------------------------------------------

    def placed(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], AlertPlacement]:
        """The stored alerts among `keys` (fingerprint, startsAt), with their incidents."""
        wanted = list(set(keys))
        found: dict[tuple[str, int], AlertPlacement] = {}
        with self.engine.connect() as conn:
            for chunk in range(0, len(wanted), 500):
                part = wanted[chunk : chunk + 500]
                rows = conn.execute(select(alerts).where(tuple_(alerts.c.fingerprint, alerts.c.starts_at_ns).in_(part)))
                for row in rows:
                    alert = _alert(row)
                    found[alert.key] = AlertPlacement(alert, row.incident_id)
        return found

    def open_alerts(self, start_ns: int, end_ns: int) -> list[tuple[Alert, Incident]]:
        """Alerts starting in [start_ns, end_ns] that belong to open incidents."""
        query = (
            select(alerts, incidents.c.id.label("inc_id"))
            .join(incidents, alerts.c.incident_id == incidents.c.id)
            .where(incidents.c.status == IncidentStatus.OPEN.value)
            .where(alerts.c.starts_at_ns.between(start_ns, end_ns))
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
            owners = {
                r.id: _incident(r)
                for r in conn.execute(select(incidents).where(incidents.c.id.in_({r.inc_id for r in rows})))
            }
        return [(_alert(r), owners[r.inc_id]) for r in rows]

    def record(self, new: Sequence[AlertPlacement], resolved: Sequence[Alert], now_ns: int) -> list[str]:
        """Stores new alerts in their incidents and resolutions of stored alerts, in one
        transaction; returns the incidents touched, in first-touched order."""
        with self.engine.begin() as conn:
            for alert in resolved:
                conn.execute(
                    alerts.update()
                    .where(alerts.c.fingerprint == alert.fingerprint, alerts.c.starts_at_ns == alert.starts_at_ns)
                    .values(status=AlertStatus.RESOLVED.value, ends_at_ns=alert.ends_at_ns)
                )
            resolved_ids = self._owners(conn, [a.key for a in resolved])
            touched = list(dict.fromkeys([p.incident_id for p in new] + resolved_ids))
            known = set(conn.scalars(select(incidents.c.id).where(incidents.c.id.in_(touched))))
            for incident in dict.fromkeys(p.incident_id for p in new):
                if incident not in known:
                    conn.execute(
                        incidents.insert().values(
                            id=incident,
                            status=IncidentStatus.OPEN.value,
                            started_at_ns=0,
                            alert_count=0,
                            services=[],
                            updated_ns=now_ns,
                        )
                    )
            if new:
                conn.execute(alerts.insert(), [self._row(p, now_ns) for p in new])
            for incident in touched:
                self._refresh(conn, incident, now_ns)
        return touched

    @staticmethod
    def _owners(conn: Connection, keys: Sequence[tuple[str, int]]) -> list[str]:
        if not keys:
            return []
        query = select(alerts.c.incident_id).where(tuple_(alerts.c.fingerprint, alerts.c.starts_at_ns).in_(keys))
        return list(dict.fromkeys(conn.scalars(query)))

    @staticmethod
    def _row(p: AlertPlacement, now_ns: int) -> dict[str, Any]:
        a = p.alert
        return {
            "incident_id": p.incident_id,
            "fingerprint": a.fingerprint,
            "starts_at_ns": a.starts_at_ns,
            "ends_at_ns": a.ends_at_ns,
            "status": a.status.value,
            "service": a.service,
            "labels": dict(a.labels),
            "annotations": dict(a.annotations),
            "generator_url": a.generator_url,
            "received_ns": now_ns,
        }

    @staticmethod
    def _refresh(conn: Connection, incident: str, now_ns: int) -> None:
        """Derives an incident's start, status, end, count and services from its alerts."""
        rows = conn.execute(
            select(alerts.c.starts_at_ns, alerts.c.ends_at_ns, alerts.c.status, alerts.c.service).where(
                alerts.c.incident_id == incident
            )
        ).all()
        firing = any(r.status == AlertStatus.FIRING.value for r in rows)
        ends = [r.ends_at_ns for r in rows if r.ends_at_ns is not None]
        conn.execute(
            incidents.update()
            .where(incidents.c.id == incident)
            .values(
                status=(IncidentStatus.OPEN if firing else IncidentStatus.RESOLVED).value,
                started_at_ns=min(r.starts_at_ns for r in rows),
                ended_at_ns=None if firing or not ends else max(ends),
                alert_count=len(rows),
                services=sorted({r.service for r in rows if r.service}),
                updated_ns=now_ns,
            )
        )

    # -- incidents --------------------------------------------------------------------------

    def incident(self, incident_id: str) -> Incident | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(incidents).where(incidents.c.id == incident_id)).first()
        return None if row is None else _incident(row)

    def incidents(self, status: IncidentStatus | None = None, limit: int = 100) -> list[Incident]:
        """Newest first (by the earliest alert's startsAt)."""
        query = select(incidents).order_by(incidents.c.started_at_ns.desc(), incidents.c.id).limit(limit)
        if status is not None:
            query = query.where(incidents.c.status == status.value)
        with self.engine.connect() as conn:
            return [_incident(r) for r in conn.execute(query)]

    def counts(self) -> dict[IncidentStatus, int]:
        """How many incidents are in each status."""
        query = select(incidents.c.status, func.count()).group_by(incidents.c.status)
        with self.engine.connect() as conn:
            found = {IncidentStatus(status): int(n) for status, n in conn.execute(query)}
        return {status: found.get(status, 0) for status in IncidentStatus}

    def alerts_of(self, incident_id: str) -> list[Alert]:
        query = select(alerts).where(alerts.c.incident_id == incident_id).order_by(alerts.c.starts_at_ns, alerts.c.id)
        with self.engine.connect() as conn:
            return [_alert(r) for r in conn.execute(query)]

    # -- rankings ---------------------------------------------------------------------------

    def save_ranking(self, incident_id: str, stored: StoredRanking, now_ns: int) -> None:
        values = {
            "alert_nodes": list(stored.alert_nodes),
            "ranking": ranking_to_bytes(stored.ranking),
            "updated_ns": now_ns,
        }
        with self.engine.begin() as conn:
            done = conn.execute(rankings.update().where(rankings.c.incident_id == incident_id).values(**values))
            if done.rowcount == 0:
                conn.execute(rankings.insert().values(incident_id=incident_id, **values))

    def rankings(self, incident_ids: Sequence[str], top: int | None = None) -> dict[str, StoredRanking]:
        """The latest rankings of these incidents, with only their first `top` causes when given."""
        query = select(rankings).where(rankings.c.incident_id.in_(list(incident_ids)))
        with self.engine.connect() as conn:
            return {
                r.incident_id: StoredRanking(ranking_from_bytes(r.ranking, top), tuple(r.alert_nodes))
                for r in conn.execute(query)
            }

    # -- labels -----------------------------------------------------------------------------

    def save_label(self, labelled: LabelledIncident) -> None:
        """Stores a responder's label with its snapshot, replacing the incident's earlier label."""
        label, snapshot = labelled.label, labelled.snapshot
        values = {
            "node": label.node,
            "fault": None if label.fault is None else label.fault.value,
            "note": label.note,
            "created_ns": label.created_at_ns,
            "alert_nodes": list(snapshot.alert_nodes),
            "start_ns": snapshot.start_ns,
            "end_ns": snapshot.end_ns,
            "evidence": evidence_to_json(snapshot.evidence),
        }
        with self.engine.begin() as conn:
            done = conn.execute(labels.update().where(labels.c.incident_id == label.incident_id).values(**values))
            if done.rowcount == 0:
                conn.execute(labels.insert().values(incident_id=label.incident_id, **values))

    def label(self, incident_id: str) -> LabelledIncident | None:
        """The incident's label; ValueError when its snapshot can't be read."""
        with self.engine.connect() as conn:
            row = conn.execute(select(labels).where(labels.c.incident_id == incident_id)).first()
        return None if row is None else _labelled(row)

    def labelled(self) -> tuple[list[LabelledIncident], dict[str, str]]:
        """Every label with its snapshot, oldest first, and apart, per incident, why a label's
        snapshot can't be read (one stored before `NodeEvidence` changed, say)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(labels).order_by(labels.c.created_ns, labels.c.incident_id)).all()
        readable, unreadable = [], {}
        for row in rows:
            try:
                readable.append(_labelled(row))
            except ValueError as exc:
                unreadable[row.incident_id] = str(exc)
        return readable, unreadable


def _labelled(row: Any) -> LabelledIncident:
    label = Label(row.incident_id, row.node, None if row.fault is None else Fault(row.fault), row.note, row.created_ns)
    snapshot = Snapshot(evidence_from_json(row.evidence), tuple(row.alert_nodes), row.start_ns, row.end_ns)
    return LabelledIncident(label, snapshot)
