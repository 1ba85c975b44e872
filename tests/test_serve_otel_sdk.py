"""Real OpenTelemetry SDK exporters (gRPC and HTTP) send spans to a running `rca serve`."""

from __future__ import annotations

import time

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from tests.conftest import Server


def _provider(service: str, exporter: SpanExporter) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _send_trace(make_exporter: type[SpanExporter], endpoint: str) -> None:
    """frontend → checkout (instrumented) → redis (virtual); children are exported first."""
    exporter_args = {"endpoint": endpoint}
    frontend = _provider("frontend", make_exporter(**exporter_args))
    checkout = _provider("checkout", make_exporter(**exporter_args))
    f, c = frontend.get_tracer("test"), checkout.get_tracer("test")
    with f.start_as_current_span("GET /cart", kind=trace.SpanKind.SERVER):
        with f.start_as_current_span("POST checkout", kind=trace.SpanKind.CLIENT) as client:
            client.set_attribute("peer.service", "checkout")
            ctx = trace.set_span_in_context(client)
            with c.start_as_current_span("PlaceOrder", context=ctx, kind=trace.SpanKind.SERVER):
                with c.start_as_current_span("GET", kind=trace.SpanKind.CLIENT) as db:
                    db.set_attribute("db.system", "redis")
                    time.sleep(0.002)
    frontend.shutdown()
    checkout.shutdown()


def _graph(server: Server) -> dict[str, list[dict[str, object]]]:
    response = httpx.get(f"{server.api}/graph", timeout=10)
    assert response.status_code == 200
    body: dict[str, list[dict[str, object]]] = response.json()
    return body


@pytest.mark.parametrize(
    ("exporter", "endpoint"),
    [(GrpcExporter, "grpc"), (HttpExporter, "http")],
    ids=["otlp-grpc", "otlp-http"],
)
def test_sdk_exporter_builds_expected_edges(server: Server, exporter: type[SpanExporter], endpoint: str) -> None:
    url = f"http://{server.otlp_grpc}" if endpoint == "grpc" else f"http://{server.otlp_http}/v1/traces"
    _send_trace(exporter, url)
    graph = _graph(server)
    edges = {(e["source"], e["target"]) for e in graph["edges"]}
    assert ("frontend", "checkout") in edges
    assert ("checkout", "redis") in edges
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert nodes["redis"]["detail__kind"] == "virtual"
    assert nodes["checkout"]["detail__kind"] == "service"
    virtual = {(e["source"], e["target"]): e["detail__virtual"] for e in graph["edges"]}
    assert virtual[("frontend", "checkout")] is False  # the peer.service call paired with its server span
    for node in graph["nodes"]:
        assert abs(float(node["arc__errors"]) + float(node["arc__ok"]) - 1.0) < 1e-6
