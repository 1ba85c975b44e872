"""`/metrics` in process: what the exposition says after real decoding, ingest and ranking, each
`ServiceMetrics` with its own registry."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine

from api.metrics import ServiceMetrics
from ingest.otlp_logs import decode_logs_protobuf
from ingest.otlp_proto import decode_protobuf
from rca.graph.service_graph import ServiceGraph
from rca.graph.sink import SpanSink
from rca.graph.writer import GraphWriter
from rca.incidents.service import IncidentService
from rca.ranking.causes import Cause, Ranking
from rca.telemetry.alerts import Alert, AlertStatus
from rca.telemetry.faults import Fault
from storage.sql import SqlIncidentStore
from tests.logfactory import logs_request, record
from tests.spanfactory import T0, request, sid, span

MS = 1_000_000
INFERENCE_MS = 12.5
PROBABILITIES = {"payment": 0.7, "checkout": 0.2, "gateway": 0.1}


class FixedRanker:
    """Always the same causes, owned by the services of the test graph."""

    def rank(self, graph: ServiceGraph, *, alert_nodes: Sequence[str], start_ns: int, end_ns: int) -> Ranking:
        causes = tuple(
            Cause(rank, node, node, Fault.LATENCY, p, (), (node, "gateway"))
            for rank, (node, p) in enumerate(PROBABILITIES.items(), start=1)
        )
        return Ranking(start_ns, end_ns, "fixed", INFERENCE_MS, causes)


class Wired:
    """The pieces `rca serve` wires together, with the metrics around them."""

    def __init__(self, db: Path) -> None:
        self.metrics = ServiceMetrics()
        self.writer = GraphWriter(ServiceGraph(window_seconds=10, retention_seconds=10 * 365 * 86400.0))
        self.sink = SpanSink(self.writer, decode_seconds=self.metrics.decode_seconds.observe)
        self.store = SqlIncidentStore.open(f"sqlite:///{db}")
        self.incidents = IncidentService(
            store=self.store, ranker=self.metrics.observed(FixedRanker()), graphs=self.writer, clock=lambda: T0
        )
        self.metrics.watch(self.sink, self.writer, self.store)

    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        body, content_type = self.metrics.exposition("")
        assert content_type.startswith("text/plain")
        families = text_string_to_metric_families(body.decode())
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}

    def close(self) -> None:
        self.writer.close()
        self.store.close()


@pytest.fixture
def wired(tmp_path: Path) -> Iterator[Wired]:
    made = Wired(tmp_path / "rca.db")
    yield made
    made.close()


def _export(sink: SpanSink) -> None:
    """gateway → checkout → payment, plus one span with a 1-byte id (rejected)."""
    chain = [("gateway", 1, 0), ("checkout", 2, 1), ("payment", 3, 2)]
    for service, span_id, parent in chain:
        message = request(service, [span(sid(span_id), sid(parent) if parent else b"", T0, T0 + 10 * MS)])
        if service == "payment":
            message.resource_spans[0].scope_spans[0].spans.append(span(b"\x01"))
        with sink.admit():
            sink.export(decode_protobuf(message.SerializeToString()))


def _alert() -> Alert:
    return Alert(
        fingerprint="f1",
        status=AlertStatus.FIRING,
        labels={"alertname": "HighLatency", "service": "gateway"},
        annotations={},
        starts_at_ns=T0 + 5 * MS,
        ends_at_ns=None,
        generator_url="http://prometheus/graph",
        service="gateway",
    )


def test_exposition_counts_what_the_service_did(wired: Wired) -> None:
    _export(wired.sink)
    wired.sink.refuse("malformed")
    [summary] = wired.incidents.handle([_alert()])
    s = wired.samples()
    assert s[("rca_spans_received_total", ())] == 3
    assert sum(v for (name, _), v in s.items() if name == "rca_spans_rejected_total") == 1
    assert s[("rca_otlp_requests_refused_total", (("reason", "malformed"),))] == 1
    assert s[("rca_otlp_decode_seconds_count", ())] == 3  # one per admitted request
    assert s[("rca_ingest_queue_depth", ())] == 0
    assert s[("rca_graph_spans_total", ())] == 3
    assert s[("rca_ranking_inference_seconds_count", ())] == 1
    assert s[("rca_ranking_inference_seconds_sum", ())] == pytest.approx(INFERENCE_MS / 1000)
    assert s[("rca_store_up", ())] == 1
    assert s[("rca_incidents", (("status", "open"),))] == 1
    assert s[("rca_incidents", (("status", "resolved"),))] == 0
    for node, p in PROBABILITIES.items():
        labels = (("fault", "latency"), ("incident", summary.incident.id), ("node", node), ("service", node))
        assert s[("rca_node_root_cause_probability", labels)] == pytest.approx(p)
        assert s[("rca_service_health", (("service", node),))] == pytest.approx(1 - p)


def test_log_records_are_counted_from_receipt_to_templates(wired: Wired) -> None:
    records = [record(f"order {n} shipped in {n * 3} ms") for n in range(5)] + [record("cache miss", time=0)]
    with wired.sink.admit():
        wired.sink.export_logs(decode_logs_protobuf(logs_request("shipping", records)))
    s = wired.samples()
    assert s[("rca_log_records_received_total", ())] == 5
    [(labels, rejected)] = [(k[1], v) for k, v in s.items() if k[0] == "rca_log_records_rejected_total"]
    assert rejected == 1 and "timestamp" in dict(labels)["reason"]
    assert not [k for k in s if k[0] == "rca_log_records_dropped_total"]
    assert s[("rca_graph_log_records_total", ())] == 5
    assert s[("rca_graph_late_log_records_total", ())] == 0
    assert s[("rca_log_templates", ())] == 1  # five records of one template
    assert s[("rca_spans_received_total", ())] == 0


def test_resolved_incidents_leave_the_posterior_gauges(wired: Wired) -> None:
    _export(wired.sink)
    wired.incidents.handle([_alert()])
    resolved = replace(_alert(), status=AlertStatus.RESOLVED, ends_at_ns=T0 + 9 * MS)
    wired.incidents.handle([resolved])
    s = wired.samples()
    assert s[("rca_incidents", (("status", "resolved"),))] == 1
    assert not [k for k in s if k[0] == "rca_node_root_cause_probability"]
    assert {k[1]: v for k, v in s.items() if k[0] == "rca_service_health"} == {
        (("service", n),): 1.0 for n in PROBABILITIES
    }


def test_each_service_instance_has_its_own_registry(wired: Wired, tmp_path: Path) -> None:
    _export(wired.sink)
    other = Wired(tmp_path / "other.db")
    try:
        assert other.samples()[("rca_spans_received_total", ())] == 0
        assert wired.samples()[("rca_spans_received_total", ())] == 3
    finally:
        other.close()


def test_openmetrics_when_asked(wired: Wired) -> None:
    body, content_type = wired.metrics.exposition("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")
    assert b"rca_spans_received_total 0" in body


def test_a_failing_store_leaves_the_rest_of_the_scrape(tmp_path: Path) -> None:
    metrics = ServiceMetrics()
    writer = GraphWriter(ServiceGraph())
    try:
        unreachable = SqlIncidentStore(create_engine(f"sqlite:///{tmp_path}/no-such-dir/rca.db"))
        metrics.watch(SpanSink(writer), writer, unreachable)
        body, _ = metrics.exposition("")
    finally:
        writer.close()
    samples = {s.name: s.value for f in text_string_to_metric_families(body.decode()) for s in f.samples}
    assert samples["rca_store_up"] == 0
    assert samples["rca_spans_received_total"] == 0
    assert "rca_incidents" not in samples
