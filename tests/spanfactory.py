"""Small helpers that build OTLP requests and span batches by hand for tests."""

from __future__ import annotations

import json

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from rca.evidence.nodes import NodeEvidence, extract_evidence
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.spans import SpanBatch

T0 = 1_767_000_000_000_000_000  # an event time, ns


def sid(n: int) -> bytes:
    return n.to_bytes(8, "big")


def tid(n: int) -> bytes:
    return n.to_bytes(16, "big")


def batch(*spans: tuple[str, str, int, int, int, int]) -> SpanBatch:
    """Spans given as (service, name, span id, parent id or 0, start offset ms, duration ms)."""
    builder = SpanBatchBuilder()
    for service, name, span, parent, start_ms, dur_ms in spans:
        start = T0 + start_ms * 1_000_000
        builder.add(
            tid(1),
            sid(span),
            sid(parent) if parent else b"",
            service,
            name,
            2,
            start,
            start + dur_ms * 1_000_000,
            False,
            {},
            {},
        )
    return builder.build().batch


def request(service: str, spans: list[Span]) -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    rs = message.resource_spans.add()
    kv = rs.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", service
    rs.scope_spans.add().spans.extend(spans)
    return message


def span(span_id: bytes, parent: bytes = b"", start: int = T0, end: int = T0 + 1_000_000, name: str = "op") -> Span:
    return Span(
        trace_id=tid(7),
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        kind=Span.SPAN_KIND_SERVER,
    )


JSON_TRACE_ID = "5b8efff798038103d269b633813fc60c"


def otlp_json(spans: list[dict[str, object]]) -> str:
    """An OTLP/JSON export request of `spans` from service `svc`."""
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]}
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]})


def json_span(span_id: str, **fields: object) -> dict[str, object]:
    """One OTLP/JSON span of 2 ms at T0; `fields` override or add keys."""
    return {
        "traceId": JSON_TRACE_ID,
        "spanId": span_id,
        "name": "op",
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + 2_000_000),
        **fields,
    }


def evidence_of_last_minutes(builder: SpanBatchBuilder, end_ns: int, minutes: float = 5.0) -> NodeEvidence:
    """The evidence of the spans built, over the `minutes` before `end_ns` (history before it)."""
    graph = ServiceGraph(retention_seconds=3600.0)
    graph.add(builder.build().batch)
    return extract_evidence(graph, start_ns=end_ns - int(minutes * 60e9), end_ns=end_ns)
