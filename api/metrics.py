"""rca's own health for Prometheus (`GET /metrics`), in a registry of each service instance.

Latencies are histograms observed as the work happens (decode at the receivers' `SpanSink`,
inference where the incident service ranks); everything else is read from the core objects
at scrape time, so nothing is counted twice: the sink's span, log record, data point and request
counts, the ingest queue depth, the graph's pending/orphaned/late spans, its log records and
templates, its data points (those of metrics its table does not map, by metric name),
incidents by status, and the posterior of the open incidents' top causes with a health gauge
per service. `rca_model_info` names the model and the version of its parameters.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from rca.graph.names import NodeKind
from rca.graph.service_graph import IngestCounts, ServiceGraph
from rca.graph.sink import SpanSink
from rca.graph.writer import GraphWriter
from rca.incidents.model import IncidentStatus
from rca.incidents.store import IncidentStore
from rca.ranking.causes import Ranker, Ranking

log = logging.getLogger("rca.metrics")
DECODE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
RANKING_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
OPEN_INCIDENTS_SHOWN = 100  # newest open incidents whose causes become gauges
CAUSES_SHOWN = 5  # top causes per open incident


class ObservedRanker:
    """A `Ranker` that records each ranking's inference time in a histogram."""

    def __init__(self, ranker: Ranker, histogram: Histogram) -> None:
        self._ranker = ranker
        self._histogram = histogram

    def rank(self, graph: ServiceGraph, *, alert_nodes: Sequence[str], start_ns: int, end_ns: int) -> Ranking:
        ranking = self._ranker.rank(graph, alert_nodes=alert_nodes, start_ns=start_ns, end_ns=end_ns)
        self._histogram.observe(ranking.inference_ms / 1000.0)
        return ranking


def _by_reason(name: str, documentation: str, counts: Mapping[str, int]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=["reason"])
    for reason, value in sorted(counts.items()):
        family.add_metric([reason], value)
    return family


def _services(graph: ServiceGraph) -> list[str]:
    names = graph.names
    return [n for n, kind in zip(names.nodes, names.kinds, strict=True) if kind is NodeKind.SERVICE]


class _StateCollector:
    """Reads the service's state at scrape time (prometheus_client's custom collector protocol)."""

    def __init__(self, sink: SpanSink, writer: GraphWriter, store: IncidentStore | None) -> None:
        self.sink = sink
        self.writer = writer
        self.store = store

    def describe(self) -> list[Metric]:
        return []  # metrics are known only at scrape time; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        yield from self._ingest()
        graph_counts, services, unknown = self.writer.read(
            lambda g: (g.counts(), _services(g), dict(g.measures.unknown))
        )
        yield from self._graph(graph_counts)
        yield from self._metric_points(graph_counts, unknown)
        if self.store is not None:
            try:
                incidents = list(self._incidents(self.store, services))
            except Exception:  # the database is away: say so, and keep the rest of the scrape
                log.exception("reading incidents for /metrics failed")
                incidents = []
            yield GaugeMetricFamily("rca_store_up", "Whether the incident store answered this scrape.", bool(incidents))
            yield from incidents

    def _ingest(self) -> Iterator[Metric]:
        counts = self.sink.counts()
        yield CounterMetricFamily("rca_spans_received", "Spans accepted by the OTLP receivers.", value=counts.received)
        yield _by_reason("rca_spans_rejected", "Spans refused one by one (OTLP partial success).", counts.rejected)
        yield _by_reason("rca_spans_dropped", "Accepted spans not kept (the client was told to retry).", counts.dropped)
        yield _by_reason(
            "rca_otlp_requests_refused", "Whole OTLP export requests refused before decoding.", counts.requests_refused
        )
        logs = self.sink.log_counts()
        yield CounterMetricFamily(
            "rca_log_records_received", "Log records accepted by the OTLP receivers.", value=logs.received
        )
        yield _by_reason(
            "rca_log_records_rejected", "Log records refused one by one (OTLP partial success).", logs.rejected
        )
        yield _by_reason(
            "rca_log_records_dropped", "Accepted log records not kept (the client was told to retry).", logs.dropped
        )
        points = self.sink.metric_counts()
        yield CounterMetricFamily(
            "rca_data_points_received", "Metric data points accepted by the OTLP receivers.", value=points.received
        )
        yield _by_reason(
            "rca_data_points_rejected", "Data points refused one by one (OTLP partial success).", points.rejected
        )
        yield _by_reason(
            "rca_data_points_dropped", "Accepted data points not kept (the client was told to retry).", points.dropped
        )
        yield GaugeMetricFamily(
            "rca_ingest_queue_depth", "Span, log and metric batches waiting for the graph writer.", self.writer.depth
        )

    @staticmethod
    def _graph(counts: IngestCounts) -> Iterator[Metric]:
        yield CounterMetricFamily("rca_graph_spans", "Spans added to the service graph.", value=counts.spans)
        yield GaugeMetricFamily("rca_graph_pending_spans", "Spans waiting for their parent span.", counts.pending)
        yield CounterMetricFamily(
            "rca_graph_orphaned_spans", "Spans whose parent never arrived within the wait.", value=counts.orphaned
        )
        yield CounterMetricFamily(
            "rca_graph_late_spans", "Spans older than the retention when they arrived.", value=counts.outside_retention
        )
        yield CounterMetricFamily(
            "rca_graph_log_records", "Log records added to the service graph.", value=counts.log_records
        )
        yield CounterMetricFamily(
            "rca_graph_late_log_records",
            "Log records older than the retention when they arrived.",
            value=counts.logs_outside_retention,
        )
        yield GaugeMetricFamily("rca_log_templates", "Log templates the template miner holds.", counts.log_templates)

    @staticmethod
    def _metric_points(counts: IngestCounts, unknown: Mapping[str, int]) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "rca_graph_data_points",
            "Data points of mapped metrics added to the service graph.",
            value=counts.metric_points,
        )
        yield CounterMetricFamily(
            "rca_graph_late_data_points",
            "Data points older than the retention when they arrived.",
            value=counts.metrics_outside_retention,
        )
        family = CounterMetricFamily(
            "rca_unmapped_data_points",
            "Data points of metrics the metric table does not map (kept out of the evidence), by metric name.",
            labels=["metric"],
        )
        for name, value in sorted(unknown.items()):
            family.add_metric([name], value)
        yield family

    @staticmethod
    def _incidents(store: IncidentStore, services: list[str]) -> Iterator[Metric]:
        incidents = GaugeMetricFamily("rca_incidents", "Incidents by status.", labels=["status"])
        for status, count in store.counts().items():
            incidents.add_metric([status.value], count)
        yield incidents
        open_ids = [i.id for i in store.incidents(IncidentStatus.OPEN, limit=OPEN_INCIDENTS_SHOWN)]
        rankings = store.rankings(open_ids, top=CAUSES_SHOWN)
        causes = GaugeMetricFamily(
            "rca_node_root_cause_probability",
            f"Posterior probability that the node is the root cause (top {CAUSES_SHOWN} of each open incident).",
            labels=["incident", "node", "service", "fault"],
        )
        worst = dict.fromkeys(services, 0.0)
        for incident_id in open_ids:
            if incident_id not in rankings:
                continue
            for cause in rankings[incident_id].ranking.causes:
                causes.add_metric([incident_id, cause.node, cause.service, cause.fault.value], cause.probability)
                worst[cause.service] = max(worst.get(cause.service, 0.0), cause.probability)
        yield causes
        health = GaugeMetricFamily(
            "rca_service_health",
            "1 - the highest root-cause probability of the service's nodes over the open incidents.",
            labels=["service"],
        )
        for service, probability in sorted(worst.items()):
            health.add_metric([service], 1.0 - probability)
        yield health


class ServiceMetrics:
    """The metrics of one `rca serve`: its own registry (not the process-global one)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.decode_seconds = Histogram(
            "rca_otlp_decode_seconds",
            "Time from admitting an OTLP export request to its spans or log records decoded (gunzip included).",
            buckets=DECODE_BUCKETS,
            registry=self.registry,
        )
        self.ranking_seconds = Histogram(
            "rca_ranking_inference_seconds",
            "Inference time of each root-cause ranking.",
            buckets=RANKING_BUCKETS,
            registry=self.registry,
        )

    def model_info(self, name: str, version: str) -> None:
        """`rca_model_info{name, version} 1`: the model serving rankings and its parameters' version."""
        documentation = "The root-cause model and its parameters' version."
        Gauge("rca_model_info", documentation, ["name", "version"], registry=self.registry).labels(name, version).set(1)

    def observed(self, ranker: Ranker) -> Ranker:
        return ObservedRanker(ranker, self.ranking_seconds)

    def watch(self, sink: SpanSink, writer: GraphWriter, store: IncidentStore | None) -> None:
        """Adds the scrape-time reading of these objects."""
        self.registry.register(_StateCollector(sink, writer, store))

    def exposition(self, accept: str) -> tuple[bytes, str]:
        """The exposition in the format `accept` asks for (OpenMetrics or Prometheus text), and its type."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type


def mount_metrics(app: FastAPI, metrics: ServiceMetrics) -> None:
    """`GET /metrics`: the Prometheus exposition (left open by `--api-token`, as docs/interface.md says)."""

    formats: dict[str, Any] = {"text/plain": {}, "application/openmetrics-text": {}}
    said = "Prometheus text, or OpenMetrics when Accept asks"
    documented: dict[int | str, dict[str, Any]] = {200: {"description": said, "content": formats}}

    @app.get("/metrics", response_class=Response, summary="rca's own health for Prometheus", responses=documented)
    def prometheus(request: Request) -> Response:
        body, content_type = metrics.exposition(request.headers.get("accept", ""))
        return Response(body, media_type=content_type)
