"""Real OpenTelemetry SDK log exporters (gRPC and HTTP) send log records to an in-process `rca serve`:
each record lands on its resource's node, the ones written inside a span on that span's operation,
and `/metrics` counts them."""

from __future__ import annotations

import asyncio
import gc
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

from rca.app.compose import Service
from rca.app.config import HostPort, Settings
from rca.graph.accumulators import LogSum
from rca.graph.service_graph import ServiceGraph

CHECKOUT = Resource.create({"service.name": "checkout"})
# What the Collector's k8sattributes processor gives a pod's file logs: no service.name at all
# (`Resource.create` would add the SDK's `unknown_service` default).
PAYMENT_POD = Resource({"k8s.pod.name": "payment-7d9f8b6c5-x2x4q", "k8s.namespace.name": "shop"})


@dataclass(frozen=True)
class Live:
    service: Service
    otlp_grpc: str
    otlp_http: str


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    """`Service.run` in a thread of its own, every listener on port 0."""
    loopback = HostPort("127.0.0.1", 0)
    service = Service(Settings(otlp_grpc=loopback, otlp_http=loopback, http=loopback, db=f"sqlite:///{tmp_path}/r.db"))
    loop, stop = asyncio.new_event_loop(), asyncio.Event()
    announced: queue.Queue[dict[str, str]] = queue.Queue()
    thread = threading.Thread(target=loop.run_until_complete, args=(service.run(stop, announced.put),))
    thread.start()
    try:
        listening = announced.get(timeout=60)
        yield Live(service, listening["otlp_grpc"], listening["otlp_http"])
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
        loop.close()
        gc.unfreeze()  # `run` froze what startup built; give the rest of the test session its collector back


def _emit(live: Live, protocol: str) -> None:
    """checkout: an error and an info record inside a server span, an info record outside any;
    the payment pod: info, warning and error records with no span."""
    if protocol == "grpc":
        logs: LogRecordExporter = GrpcLogExporter(endpoint=f"http://{live.otlp_grpc}", insecure=True)
        pod_logs: LogRecordExporter = GrpcLogExporter(endpoint=f"http://{live.otlp_grpc}", insecure=True)
        spans: SpanExporter = GrpcSpanExporter(endpoint=f"http://{live.otlp_grpc}", insecure=True)
    else:
        logs = HttpLogExporter(endpoint=f"http://{live.otlp_http}/v1/logs")
        pod_logs = HttpLogExporter(endpoint=f"http://{live.otlp_http}/v1/logs")
        spans = HttpSpanExporter(endpoint=f"http://{live.otlp_http}/v1/traces")
    tracing = TracerProvider(resource=CHECKOUT)
    tracing.add_span_processor(SimpleSpanProcessor(spans))
    checkout = LoggerProvider(resource=CHECKOUT)
    checkout.add_log_record_processor(BatchLogRecordProcessor(logs))
    payment = LoggerProvider(resource=PAYMENT_POD)
    payment.add_log_record_processor(SimpleLogRecordProcessor(pod_logs))
    log, pod = checkout.get_logger("checkout.orders"), payment.get_logger("payment")
    with tracing.get_tracer("tests").start_as_current_span("PlaceOrder", kind=SpanKind.SERVER):
        log.emit(severity_number=SeverityNumber.ERROR, severity_text="ERROR", body="charge failed for order 1234")
        log.emit(severity_number=SeverityNumber.INFO, severity_text="INFO", body="order 1234 placed in 35 ms")
    log.emit(severity_number=SeverityNumber.INFO, body="cache warmed with 812 entries")
    pod.emit(severity_number=SeverityNumber.INFO, body="charging card ending 4242 for 31.50 EUR")
    pod.emit(severity_number=SeverityNumber.WARN, body="gateway slow, retrying charge attempt 2")
    pod.emit(severity_text="ERROR", body="charge declined by gateway: code 51")  # no number: the text says
    tracing.shutdown()  # the span first, so that the records written inside it find it
    checkout.shutdown()
    payment.shutdown()


def _samples(live: Live) -> dict[str, float]:
    body, _ = live.service.metrics.exposition("")
    return {s.name: s.value for f in text_string_to_metric_families(body.decode()) for s in f.samples if not s.labels}


def _per_node(graph: ServiceGraph) -> dict[str, tuple[float, float]]:
    """(records, error records) per node, over the retention."""
    keys, sums, _ = graph.aggregate(0, graph.newest_ns + 1).logs.view()
    out: dict[str, tuple[float, float]] = {}
    for node in np.unique(keys >> 32).tolist():
        rows = (keys >> 32) == node
        out[graph.names.nodes[node]] = (sums[rows, LogSum.RECORDS].sum(), sums[rows, LogSum.ERRORS].sum())
    return out


def _per_operation(graph: ServiceGraph) -> dict[tuple[str, str], float]:
    """Records joined to their span, per (node, operation)."""
    keys, sums, _ = graph.aggregate(0, graph.newest_ns + 1).log_ops.view()
    nodeops = keys >> 32
    nodes, ops = graph.names.nodeop_node[nodeops].tolist(), graph.names.nodeop_op[nodeops].tolist()
    out: dict[tuple[str, str], float] = {}
    for n, o, records in zip(nodes, ops, sums[:, LogSum.RECORDS].tolist(), strict=True):
        key = (graph.names.nodes[n], graph.names.ops[o])
        out[key] = out.get(key, 0.0) + records
    return out


@pytest.mark.parametrize("protocol", ["grpc", "http"], ids=["otlp-grpc", "otlp-http"])
def test_sdk_log_records_land_on_their_nodes_and_are_counted(live: Live, protocol: str) -> None:
    _emit(live, protocol)  # the providers are shut down: every record was acknowledged, so is in the graph
    assert live.service.writer.read(_per_node) == {"checkout": (3.0, 1.0), "payment": (3.0, 1.0)}
    assert live.service.writer.read(_per_operation) == {("checkout", "PlaceOrder"): 2.0}
    samples = _samples(live)
    assert samples["rca_log_records_received_total"] == 6
    assert samples["rca_graph_log_records_total"] == 6
    assert samples["rca_graph_late_log_records_total"] == 0
    assert 1 <= samples["rca_log_templates"] <= 6
    assert samples["rca_spans_received_total"] == 1
