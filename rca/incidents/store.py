"""Where incidents live: the protocol the incident service and feedback write through, which the
database adapter (`storage.sql.SqlIncidentStore`) implements. Every write is one transaction,
committed before the method returns."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from rca.incidents.labels import LabelledIncident
from rca.incidents.model import AlertPlacement, Incident, IncidentStatus, StoredRanking
from rca.telemetry.alerts import Alert


class IncidentStore(Protocol):
    def placed(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], AlertPlacement]:
        """The stored alerts among `keys` (fingerprint, startsAt), with their incidents."""
        ...

    def open_alerts(self, start_ns: int, end_ns: int) -> list[tuple[Alert, Incident]]:
        """Alerts starting in [start_ns, end_ns] that belong to open incidents."""
        ...

    def record(self, new: Sequence[AlertPlacement], resolved: Sequence[Alert], now_ns: int) -> list[str]:
        """Stores new alerts in their incidents and resolutions of stored alerts; the incidents touched."""
        ...

    def incident(self, incident_id: str) -> Incident | None: ...

    def incidents(self, status: IncidentStatus | None = None, limit: int = 100) -> list[Incident]:
        """Newest first (by the earliest alert's startsAt)."""
        ...

    def counts(self) -> dict[IncidentStatus, int]:
        """How many incidents are in each status."""
        ...

    def alerts_of(self, incident_id: str) -> list[Alert]: ...

    def save_ranking(self, incident_id: str, stored: StoredRanking, now_ns: int) -> None: ...

    def rankings(self, incident_ids: Sequence[str], top: int | None = None) -> dict[str, StoredRanking]:
        """The latest rankings of these incidents, with only their first `top` causes when given."""
        ...

    def save_label(self, labelled: LabelledIncident) -> None:
        """Stores a responder's label with its snapshot, replacing the incident's earlier label."""
        ...

    def label(self, incident_id: str) -> LabelledIncident | None:
        """The incident's label; ValueError when its snapshot can't be read."""
        ...

    def labelled(self) -> tuple[list[LabelledIncident], dict[str, str]]:
        """Every label with its snapshot, oldest first, and per incident why a label was unreadable."""
        ...
