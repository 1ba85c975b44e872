"""Responders' feedback: the root cause they found, stored with what the model saw (`rca fit`
learns from it; the incident's ranking is left as it is).

The snapshot is taken when the label arrives, while the service graph still holds the incident's
spans: the ranker's own evidence over the window of the incident's latest ranking (the current
incident window when it has none), with the alerting nodes that ranking was asked about. One
label per incident: a later one replaces the earlier, snapshot included.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from rca.evidence.nodes import NodeEvidence
from rca.graph.service_graph import ServiceGraph
from rca.incidents.labels import Label, LabelledIncident, Snapshot
from rca.incidents.model import incident_window
from rca.incidents.service import GraphSource
from rca.incidents.store import IncidentStore
from rca.telemetry.faults import Fault


class EvidenceSource(Protocol):
    """What a ranker reasons over (`models.ranker.BayesianRanker.evidence`)."""

    def evidence(self, graph: ServiceGraph, *, start_ns: int, end_ns: int) -> NodeEvidence: ...


class FeedbackService:
    """Stores responders' labels of incidents with a snapshot of the model's evidence."""

    def __init__(
        self,
        *,
        store: IncidentStore,
        model: EvidenceSource,
        graphs: GraphSource,
        lookback_seconds: float = 300.0,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.store = store
        self.model = model
        self.graphs = graphs
        self.lookback_ns = int(lookback_seconds * 1e9)
        self.clock = clock

    def record(self, incident_id: str, *, node: str, fault: Fault | None, note: str = "") -> LabelledIncident | None:
        """Labels the incident (replacing an earlier label) and returns what was stored; None
        when there is no such incident."""
        incident = self.store.incident(incident_id)
        if incident is None:
            return None
        stored = self.store.rankings([incident_id], top=0).get(incident_id)
        alert_nodes = stored.alert_nodes if stored else incident.services

        def snapshot(graph: ServiceGraph) -> Snapshot:
            if stored is not None:
                start, end = stored.ranking.start_ns, stored.ranking.end_ns
            else:
                start, end = incident_window(incident, newest_ns=graph.newest_ns, lookback_ns=self.lookback_ns)
            return Snapshot(self.model.evidence(graph, start_ns=start, end_ns=end), alert_nodes, start, end)

        labelled = LabelledIncident(Label(incident_id, node, fault, note, self.clock()), self.graphs.read(snapshot))
        self.store.save_label(labelled)
        return labelled

    def label(self, incident_id: str) -> LabelledIncident | None:
        """The incident's label, if it has one."""
        return self.store.label(incident_id)
