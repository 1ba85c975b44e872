"""Callees named by address: a Kubernetes Service's DNS name is the service it addresses."""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

from ingest.otlp_proto import decode_protobuf
from rca.graph.names import NodeKind
from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, graph_between
from rca.telemetry.conventions import service_of_address

T0 = 1_767_225_600 * 1_000_000_000


@pytest.mark.parametrize(
    ("address", "service"),
    [
        ("pricing.shop.svc.cluster.local", "pricing"),
        ("pricing.shop.svc.cluster.local.", "pricing"),
        ("pricing.shop.svc", "pricing"),
        ("pricing.shop.svc.corp.internal", "pricing"),  # another cluster domain
        ("pricing", "pricing"),
        ("api.stripe.com", "api.stripe.com"),
        ("pricing.shop", "pricing.shop"),  # a namespace without `svc` could be any domain
        ("10.0.3.7", "10.0.3.7"),
        ("svc.example.com", "svc.example.com"),
    ],
)
def test_a_service_dns_name_reads_as_its_service(address: str, service: str) -> None:
    assert service_of_address(address) == service


def _span(trace: int, span: int, parent: int, kind: int, name: str, attributes: dict[str, str], error: bool) -> Span:
    return Span(
        trace_id=trace.to_bytes(16, "big"),
        span_id=span.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent else b"",
        name=name,
        kind=kind,
        start_time_unix_nano=T0 + span * 1_000_000,
        end_time_unix_nano=T0 + span * 1_000_000 + 20_000_000,
        attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attributes.items()],
        status=Status(code=Status.STATUS_CODE_ERROR if error else Status.STATUS_CODE_UNSET),
    )


def _resource(service: str, spans: list[Span]) -> ResourceSpans:
    resource = ResourceSpans()
    resource.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value=service)))
    resource.scope_spans.add().spans.extend(spans)
    return resource


def test_calls_the_service_never_answered_land_on_it_not_on_its_address() -> None:
    address = {"server.address": "pricing.shop.svc.cluster.local"}
    checkout = [
        _span(1, 1, 0, Span.SPAN_KIND_SERVER, "PlaceOrder", {}, False),
        _span(1, 2, 1, Span.SPAN_KIND_CLIENT, "GetPrice", address, False),  # answered: span 3
        _span(2, 4, 0, Span.SPAN_KIND_SERVER, "PlaceOrder", {}, True),
        _span(2, 5, 4, Span.SPAN_KIND_CLIENT, "GetPrice", address, True),  # refused: no server span
    ]
    pricing = [_span(1, 3, 2, Span.SPAN_KIND_SERVER, "GetPrice", {}, False)]
    request = ExportTraceServiceRequest(resource_spans=[_resource("checkout", checkout), _resource("pricing", pricing)])
    result = decode_protobuf(request.SerializeToString())
    assert result.rejected == 0
    graph = ServiceGraph()
    graph.add(result.batch)
    names = graph.names
    assert "pricing.shop.svc.cluster.local" not in names.node_ids
    assert names.kinds[names.node_ids["pricing"]] is NodeKind.SERVICE
    view = graph_between(graph, Window(T0 - 10**12, T0 + 10**12))
    assert list(view.edges) == [("checkout", "pricing")]
    assert view.edges["checkout", "pricing"]["calls"] == 2.0
