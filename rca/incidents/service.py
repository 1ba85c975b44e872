"""Alerts in, incidents and their ranked causes out: the use cases behind the incident API.

Webhook alerts are deduplicated by (fingerprint, startsAt), clustered into incidents and stored
(committed) before anything is ranked; ranking failures are logged and leave the last ranking in
place, so a storable webhook never fails. An incident is re-ranked when alerts arrive or resolve,
and when newer spans have moved its window on by at least one graph window since its last ranking
(checked on reads of that incident and by `refresh_open`).

Sources rca queries rather than receives (`rca.ranking.pull`, a Prometheus-compatible API) are pulled
over the incident window and the history the ranker reads before every ranking, outside the graph
lock; one that fails leaves the ranking to what rca has, and the ranking's `sources` says so.
`refresh_open` first brings them up to date over the graph's retention, so the graph moves on with
them as with pushed spans, and a ranking's own pull has at most the newest window left to fetch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, graph_between
from rca.incidents.causal_graph import IncidentGraph, causal_subgraph
from rca.incidents.clustering import AlertClusterer
from rca.incidents.model import (
    AlertPlacement,
    Incident,
    IncidentCauses,
    IncidentDetail,
    IncidentStatus,
    IncidentSummary,
    StoredRanking,
    incident_id,
    incident_window,
)
from rca.incidents.store import IncidentStore
from rca.incidents.topology import CallTopology, topology_between
from rca.ranking.causes import Ranker
from rca.ranking.pull import SPANS_OK, SourceStatus, TelemetryPull
from rca.telemetry.alerts import Alert, AlertStatus

log = logging.getLogger("rca.incidents")
T = TypeVar("T")
TOP_CAUSES = 5


class GraphSource(Protocol):
    """Lends the service graph to a reader with writes held off (`rca.graph.writer.GraphWriter`)."""

    def read(self, reader: Callable[[ServiceGraph], T]) -> T: ...


def _merge_redeliveries(alerts: Sequence[Alert]) -> list[Alert]:
    """One alert per (fingerprint, startsAt) of a body; a resolved copy wins over a firing one."""
    merged: dict[tuple[str, int], Alert] = {}
    for alert in alerts:
        if alert.key not in merged or alert.status is AlertStatus.RESOLVED:
            merged[alert.key] = alert
    return list(merged.values())


class IncidentService:
    """Clusters alerts into stored incidents and keeps each incident's ranking current."""

    def __init__(
        self,
        *,
        store: IncidentStore,
        ranker: Ranker,
        graphs: GraphSource,
        lookback_seconds: float = 300.0,
        clock: Callable[[], int] = time.time_ns,
        clusterer: AlertClusterer | None = None,
        pulls: Sequence[TelemetryPull] = (),
        history_seconds: float = 600.0,
    ) -> None:
        """`history_seconds`: how far before an incident's window the ranker reads (and `pulls` fetch)."""
        self.store = store
        self.ranker = ranker
        self.graphs = graphs
        self.lookback_ns = int(lookback_seconds * 1e9)
        self.clock = clock
        self.clusterer = clusterer or AlertClusterer()
        self._lock = threading.RLock()
        self._failed: dict[str, tuple[int, int]] = {}  # window of a ranking that failed, not retried
        self._topology: tuple[tuple[object, ...], CallTopology] | None = None  # the last one built, by its inputs
        self.pulls = tuple(pulls)
        self.history_ns = int(history_seconds * 1e9)

    # -- writes -----------------------------------------------------------------------------

    def handle(self, alerts: Sequence[Alert]) -> list[IncidentSummary]:
        """Stores a webhook's alerts (committed on return), re-ranks the incidents they changed
        (and those a re-sent group names, when due), and returns them with their top causes."""
        unique = _merge_redeliveries(alerts)
        with self._lock:
            changed = self._store(unique)
            ranked = {i: r for i in changed if (r := self._rank(i)) is not None}
            named = self.store.placed(a.key for a in unique).values()
            incidents = [self.store.incident(i) for i in dict.fromkeys([*changed, *(p.incident_id for p in named)])]
            for incident in incidents:
                if incident is not None and incident.id not in changed:
                    self._refreshed(incident, top=0)
            return self._summaries([i for i in incidents if i is not None], ranked)

    def _store(self, alerts: list[Alert]) -> list[str]:
        """Stores new alerts in their incidents and resolutions; returns the incidents changed."""
        stored = self.store.placed(a.key for a in alerts)
        new = [a for a in alerts if a.key not in stored]
        resolved = [
            a
            for a in alerts
            if a.key in stored and a.status is AlertStatus.RESOLVED and stored[a.key].alert.status is AlertStatus.FIRING
        ]
        placements: list[AlertPlacement] = []
        if new:
            first = min(a.starts_at_ns for a in new)
            last = max(a.starts_at_ns for a in new)
            reach = self.clusterer.reach_ns
            placed = self.store.open_alerts(first - reach, last + reach)
            try:
                topology = self.graphs.read(lambda g: self._topology_from(g, first))
                ids = self.clusterer.assign(new, placed, topology)
            except Exception:  # the alerts must still be stored: the webhook's group becomes one incident
                log.exception("clustering %d alerts failed; storing them as one incident", len(new))
                ids = [incident_id(min(new, key=lambda a: (a.starts_at_ns, a.fingerprint)))] * len(new)
            placements = [AlertPlacement(a, i) for a, i in zip(new, ids, strict=True)]
        if not placements and not resolved:
            return []
        return self.store.record(placements, resolved, self.clock())

    def _range(self, graph: ServiceGraph, first_ns: int) -> tuple[int, int]:
        """From the look-back before the first new alert (or before the newest span, when the
        graph is behind the alerts) to the newest span."""
        end = graph.newest_ns + 1
        return min(first_ns, end) - self.lookback_ns, end

    def _topology_from(self, graph: ServiceGraph, first_ns: int) -> CallTopology:
        """The topology of `_range`, reused while the range and the graph's contents are the same
        (clustering a webhook's alerts and ranking their new incident read the same one). The
        graph is resolved first, as the topology reads it: children matched to their parents
        since the last pass would otherwise change its counts between the two reads."""
        graph.resolve()
        start, end = self._range(graph, first_ns)
        key = (start, end, graph.counts(), len(graph.names.nodes))
        if self._topology is None or self._topology[0] != key:
            self._topology = key, topology_between(graph, start, end)
        return self._topology[1]

    # -- ranking ----------------------------------------------------------------------------

    def _rank(self, incident_id: str) -> StoredRanking | None:
        """Ranks an incident now; on failure logs it and keeps the last ranking."""
        incident = self.store.incident(incident_id)
        if incident is None:
            return None
        services = [a.service for a in self.store.alerts_of(incident_id)]
        sources = self._pull(incident)

        def rank(graph: ServiceGraph) -> StoredRanking:
            start, end = incident_window(incident, newest_ns=graph.newest_ns, lookback_ns=self.lookback_ns)
            topology = self._topology_from(graph, incident.started_at_ns)
            nodes = tuple(dict.fromkeys(n for s in services for n in topology.nodes_for(s)))
            ranking = self.ranker.rank(graph, alert_nodes=nodes, start_ns=start, end_ns=end)
            return StoredRanking(replace(ranking, sources=sources), nodes)

        try:
            stored = self.graphs.read(rank)
        except Exception:
            log.exception("ranking incident %s failed; keeping its last ranking", incident_id)
            self._failed[incident_id] = self._window(incident)
            return None
        self._failed.pop(incident_id, None)
        self.store.save_ranking(incident_id, stored, self.clock())
        return stored

    def _pull(self, incident: Incident) -> tuple[SourceStatus, ...]:
        """Brings the graph up to date from every pulled source over the incident's window and the
        history before it (within the graph's retention); never raises."""
        if not self.pulls:
            return (SPANS_OK,)
        end, retention_ns = self._event_now()
        if incident.ended_at_ns is not None:
            end = min(end, incident.ended_at_ns)
        start = max(incident.started_at_ns - self.lookback_ns - self.history_ns, end - retention_ns)
        return self._pull_range(start, end, f"incident {incident.id}")

    def pull_recent(self) -> tuple[SourceStatus, ...]:
        """Brings the graph up to date from every pulled source over its retention; never raises."""
        if not self.pulls:
            return (SPANS_OK,)
        end, retention_ns = self._event_now()
        return self._pull_range(end - retention_ns, end, "the graph")

    def _event_now(self) -> tuple[int, int]:
        """Now in event time, and the graph's retention: one past the newest span where spans
        arrive (replays stay in their own time), else the clock."""
        now = self.clock()
        spans, newest, retention_ns = self.graphs.read(
            lambda g: (g.counts().spans, g.newest_ns, g.retention_windows * g.window_ns)
        )
        return (min(now, newest + 1) if spans else now), retention_ns

    def _pull_range(self, start_ns: int, end_ns: int, what: str) -> tuple[SourceStatus, ...]:
        statuses = [SPANS_OK]
        for source in self.pulls:
            try:
                statuses.append(source.pull(start_ns, end_ns))
            except Exception as exc:  # a source must never fail the ranking
                log.exception("pulling %s for %s failed", source.name, what)
                statuses.append(SourceStatus(source.name, False, f"pull failed: {exc}"))
        return tuple(statuses)

    def _window(self, incident: Incident) -> tuple[int, int]:
        newest = self.graphs.read(lambda g: g.newest_ns)
        return incident_window(incident, newest_ns=newest, lookback_ns=self.lookback_ns)

    def _due(self, incident: Incident, stored: StoredRanking | None) -> bool:
        """Whether spans have moved the incident's window on by at least one graph window since
        its ranking (or it has none yet), and no ranking of this very window failed. A graph
        behind the ranking (after a restart, say) never replaces it."""
        window_ns = self.graphs.read(lambda g: g.window_ns)
        start, end = self._window(incident)
        if self._failed.get(incident.id) == (start, end):
            return False
        return stored is None or stored.ranking.start_ns != start or end - stored.ranking.end_ns >= window_ns

    def _refreshed(self, incident: Incident, top: int | None = None) -> StoredRanking | None:
        """The incident's ranking (its first `top` causes, when given), re-ranked and stored first
        when due: the one place where a read writes (a ranking row in the store)."""
        stored = self.store.rankings([incident.id], top).get(incident.id)
        return (self._rank(incident.id) or stored) if self._due(incident, stored) else stored

    def refresh_open(self) -> int:
        """Brings the pulled sources up to date (outside the incidents' lock), then re-ranks the
        open incidents that are due; returns how many it ranked."""
        self.pull_recent()
        with self._lock:
            open_incidents = self.store.incidents(IncidentStatus.OPEN, limit=1000)
            stored = self.store.rankings([i.id for i in open_incidents], top=0)
            due = [i for i in open_incidents if self._due(i, stored.get(i.id))]
            return sum(self._rank(i.id) is not None for i in due)

    # -- reads: `incident`, `causes` and `graph` re-rank and store first when the ranking is due

    def _summaries(
        self, incidents: Sequence[Incident], fresh: Mapping[str, StoredRanking] | None = None
    ) -> list[IncidentSummary]:
        """With their top causes: from `fresh` rankings (just made) where given, else stored."""
        fresh = fresh or {}
        stored = {**self.store.rankings([i.id for i in incidents if i.id not in fresh], top=TOP_CAUSES), **fresh}
        return [
            IncidentSummary(i, stored[i.id].ranking.causes[:TOP_CAUSES] if i.id in stored else ()) for i in incidents
        ]

    def incidents(self, status: IncidentStatus | None = None, limit: int = 100) -> list[IncidentSummary]:
        """Newest first."""
        return self._summaries(self.store.incidents(status, limit))

    def incident(self, incident_id: str) -> IncidentDetail | None:
        with self._lock:
            incident = self.store.incident(incident_id)
            if incident is None:
                return None
            stored = self._refreshed(incident, top=TOP_CAUSES)
            start, end = (stored.ranking.start_ns, stored.ranking.end_ns) if stored else self._window(incident)
            causes = stored.ranking.causes[:TOP_CAUSES] if stored else ()
            return IncidentDetail(
                IncidentSummary(incident, causes), tuple(self.store.alerts_of(incident_id)), start, end
            )

    def causes(self, incident_id: str) -> IncidentCauses | None:
        with self._lock:
            incident = self.store.incident(incident_id)
            if incident is None:
                return None
            stored = self._refreshed(incident)
            if stored is not None:
                return IncidentCauses(incident, stored.ranking.start_ns, stored.ranking.end_ns, stored.ranking)
            start, end = self._window(incident)
            return IncidentCauses(incident, start, end, None)

    def graph(self, incident_id: str, max_nodes: int | None = None) -> IncidentGraph | None:
        """The incident's causes and its causal graph over the ranking window (`causal_subgraph`)."""
        with self._lock:
            causes = self.causes(incident_id)
            if causes is None:
                return None
            stored = self.store.rankings([incident_id], top=0).get(incident_id)
            alert_nodes = stored.alert_nodes if stored else causes.incident.services
            window = self.graphs.read(lambda g: graph_between(g, Window(causes.start_ns, causes.end_ns)))
            return IncidentGraph(causes, alert_nodes, causal_subgraph(window, causes, alert_nodes, max_nodes))
