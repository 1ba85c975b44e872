"""IncidentService over a real graph, writer and SQLite store, with a deterministic ranker double."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from rca.graph.service_graph import ServiceGraph
from rca.graph.writer import GraphWriter
from rca.incidents.clustering import AlertClusterer
from rca.incidents.model import Incident, IncidentStatus
from rca.incidents.service import IncidentService
from rca.incidents.topology import CallTopology, topology_between
from rca.ranking.causes import Cause, Ranking
from rca.telemetry.alerts import Alert, AlertStatus
from rca.telemetry.faults import Fault
from storage.sql import SqlIncidentStore
from tests.spanfactory import T0, batch

S = 1_000_000_000


class FixedRanker:
    """A test double: every node active in the window, alerting nodes first, probabilities
    halving down the list (normalised); records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[str, ...], int, int]] = []

    def rank(self, graph: ServiceGraph, *, alert_nodes: Sequence[str], start_ns: int, end_ns: int) -> Ranking:
        self.calls.append((tuple(alert_nodes), start_ns, end_ns))
        active = sorted(topology_between(graph, start_ns, end_ns).links.nodes)
        nodes = list(dict.fromkeys([*alert_nodes, *active]))
        weights = [0.5**i for i in range(len(nodes))]
        total = sum(weights)
        causes = tuple(
            Cause(i + 1, n, n, Fault.LATENCY, w / total, (), (n, alert_nodes[0]))
            for i, (n, w) in enumerate(zip(nodes, weights, strict=True))
        )
        return Ranking(start_ns, end_ns, "fixed", 0.5, causes)


class FailingRanker:
    def rank(self, graph: ServiceGraph, *, alert_nodes: Sequence[str], start_ns: int, end_ns: int) -> Ranking:
        raise RuntimeError("the model blew up")


def shop_graph(offset_ms: int = 0) -> ServiceGraph:
    """gateway → checkout → payment, and apart from it search → index (unconnected)."""
    graph = ServiceGraph(window_seconds=10, retention_seconds=3600)
    graph.add(
        batch(
            ("gateway", "GET /", 1, 0, offset_ms, 50),
            ("checkout", "Place", 2, 1, offset_ms + 5, 30),
            ("payment", "Charge", 3, 2, offset_ms + 10, 10),
            ("search", "Query", 4, 0, offset_ms, 20),
            ("index", "Lookup", 5, 4, offset_ms + 2, 10),
        )
    )
    return graph


def alert(
    service: str,
    start_s: float,
    *,
    name: str = "HighLatency",
    status: AlertStatus = AlertStatus.FIRING,
    end_s: float | None = None,
) -> Alert:
    labels = {"alertname": name, "service": service, "severity": "critical"}
    return Alert(
        fingerprint=f"{name}-{service}",
        status=status,
        labels=labels,
        annotations={"summary": f"{service} is slow"},
        starts_at_ns=T0 + int(start_s * S),
        ends_at_ns=None if end_s is None else T0 + int(end_s * S),
        generator_url="http://prometheus/graph",
        service=service,
    )


@pytest.fixture
def writer() -> Iterator[GraphWriter]:
    running = GraphWriter(shop_graph())
    yield running
    running.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlIncidentStore]:
    opened = SqlIncidentStore.open(f"sqlite:///{tmp_path}/rca.db")
    yield opened
    opened.close()


def service_with(
    store: SqlIncidentStore, writer: GraphWriter, ranker: object, lookback_s: float = 300
) -> IncidentService:
    return IncidentService(
        store=store,
        ranker=ranker,
        graphs=writer,
        lookback_seconds=lookback_s,
        clock=lambda: T0,  # type: ignore[arg-type]
    )


def test_a_new_incident_reads_one_topology_for_clustering_and_ranking(
    store: SqlIncidentStore, writer: GraphWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a child span whose parent arrives later: the graph has something to resolve
    writer.submit(batch(("payment", "Refund", 12, 11, 60_010, 5)))
    writer.submit(batch(("checkout", "Return", 11, 1, 60_005, 20)))
    assert writer.read(lambda g: g.counts().pending) > 0
    built: list[tuple[int, int]] = []

    def counted(graph: ServiceGraph, start_ns: int, end_ns: int) -> CallTopology:
        built.append((start_ns, end_ns))
        return topology_between(graph, start_ns, end_ns)

    monkeypatch.setattr("rca.incidents.service.topology_between", counted)
    service = service_with(store, writer, FixedRanker())
    (summary,) = service.handle([alert("checkout", 0)])
    assert summary.causes and len(built) == 1


def test_redelivered_group_counts_each_alert_once(store: SqlIncidentStore, writer: GraphWriter) -> None:
    service = service_with(store, writer, FixedRanker())
    group = [alert("checkout", 0), alert("gateway", 20)]
    first = service.handle(group)
    again = service.handle(group)
    assert [s.incident.id for s in first] == [s.incident.id for s in again]
    assert len(first) == 1 and again[0].incident.alerts == 2
    assert service.incidents()[0].incident.alerts == 2


def test_resolved_notifications_resolve_alerts_then_the_incident(store: SqlIncidentStore, writer: GraphWriter) -> None:
    service = service_with(store, writer, FixedRanker())
    a, b = alert("checkout", 0), alert("gateway", 20)
    (summary,) = service.handle([a, b])
    (after_one,) = service.handle([replace(a, status=AlertStatus.RESOLVED, ends_at_ns=T0 + 60 * S)])
    assert after_one.incident.status is IncidentStatus.OPEN
    (after_both,) = service.handle([replace(b, status=AlertStatus.RESOLVED, ends_at_ns=T0 + 90 * S), a])
    assert after_both.incident.id == summary.incident.id
    assert after_both.incident.status is IncidentStatus.RESOLVED
    assert after_both.incident.ended_at_ns == T0 + 90 * S
    assert [s.incident.id for s in service.incidents(IncidentStatus.RESOLVED)] == [summary.incident.id]
    assert service.incidents(IncidentStatus.OPEN) == []


def test_window_runs_from_lookback_to_newest_span_capped(store: SqlIncidentStore, writer: GraphWriter) -> None:
    ranker = FixedRanker()
    service = service_with(store, writer, ranker, lookback_s=120)
    a = alert("checkout", -30)
    (summary,) = service.handle([a])
    nodes, start, end = ranker.calls[-1]
    assert nodes == ("checkout",)
    assert start == a.starts_at_ns - 120 * S
    assert end == writer.read(lambda g: g.newest_ns) + 1
    detail = service.incident(summary.incident.id)
    assert detail is not None and (detail.start_ns, detail.end_ns) == (start, end)
    service.handle([replace(a, status=AlertStatus.RESOLVED, ends_at_ns=T0 - 5 * S)])
    assert ranker.calls[-1][2] == T0 - 5 * S  # resolved before the newest span: capped at its end


def test_unknown_service_maps_to_nearest_name_or_trace_roots(store: SqlIncidentStore, writer: GraphWriter) -> None:
    ranker = FixedRanker()
    service = service_with(store, writer, ranker)
    service.handle([alert("checkout-ui", 0)])
    assert ranker.calls[-1][0] == ("checkout",)
    service.handle([alert("storefront", 3600)])
    assert ranker.calls[-1][0] == ("gateway", "search")


def test_ranking_failure_keeps_the_webhook_and_the_last_ranking(store: SqlIncidentStore, writer: GraphWriter) -> None:
    good = service_with(store, writer, FixedRanker())
    (summary,) = good.handle([alert("checkout", 0)])
    assert summary.causes[0].node == "checkout"
    bad = service_with(store, writer, FailingRanker())
    (again,) = bad.handle([alert("payment", 10)])
    assert again.incident.id == summary.incident.id and again.incident.alerts == 2
    assert again.causes == summary.causes
    causes = bad.causes(summary.incident.id)
    assert causes is not None and causes.ranking is not None and causes.ranking.model == "fixed"


def test_new_spans_rerank_on_read_once_the_window_moved(store: SqlIncidentStore, writer: GraphWriter) -> None:
    ranker = FixedRanker()
    service = service_with(store, writer, ranker)
    (summary,) = service.handle([alert("checkout", 0)])
    calls = len(ranker.calls)
    service.causes(summary.incident.id)
    assert len(ranker.calls) == calls  # nothing new: the stored ranking serves
    writer.submit(batch(("gateway", "GET /", 11, 0, 30_000, 5)))
    causes = service.causes(summary.incident.id)
    assert len(ranker.calls) == calls + 1
    assert causes is not None and causes.end_ns == T0 + 30_000 * 1_000_000 + 1
    assert service.refresh_open() == 0


def test_summaries_carry_the_top_five_causes(store: SqlIncidentStore, writer: GraphWriter) -> None:
    service = service_with(store, writer, FixedRanker())
    (summary,) = service.handle([alert("checkout", 0)])
    causes = service.causes(summary.incident.id)
    assert causes is not None and causes.ranking is not None
    assert len(causes.ranking.causes) == 5 == len(summary.causes)
    assert abs(sum(c.probability for c in causes.ranking.causes) - 1.0) < 1e-9


def test_clustering_failure_still_stores_the_group(store: SqlIncidentStore, writer: GraphWriter) -> None:
    class Broken(AlertClusterer):
        def assign(
            self, new: Sequence[Alert], placed: Sequence[tuple[Alert, Incident]], topology: CallTopology
        ) -> list[str]:
            raise ValueError("a bug")

    service = IncidentService(store=store, ranker=FixedRanker(), graphs=writer, clusterer=Broken())
    (summary,) = service.handle([alert("checkout", 0), alert("search", 5)])
    assert summary.incident.alerts == 2 and summary.causes
