"""Synthetic OTLP export requests for benchmarks: services calling each other, realistic attributes."""

from __future__ import annotations

import random

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

SERVICES = [f"svc-{i:02d}" for i in range(20)]


def export_requests(count: int, spans_per_request: int, start_ns: int, seed: int = 7) -> list[bytes]:
    """`count` serialized requests of `spans_per_request` spans each, spread over one minute."""
    rng = random.Random(seed)
    out = []
    for r in range(count):
        request = ExportTraceServiceRequest()
        per_service = spans_per_request // 4
        traces = [rng.randbytes(16) for _ in range(per_service)]
        ids = [[rng.randbytes(8) for _ in range(per_service)] for _ in range(4)]
        for s in range(4):
            service = SERVICES[(r + s) % len(SERVICES)]
            rs = request.resource_spans.add()
            for key, value in (
                ("service.name", service),
                ("host.name", f"node-{s}"),
                ("telemetry.sdk.language", "python"),
            ):
                kv = rs.resource.attributes.add()
                kv.key, kv.value.string_value = key, value
            spans = rs.scope_spans.add().spans
            for i in range(per_service):
                span = spans.add()
                # span i of the s-th service is called by span i of the one before: real trees
                span.trace_id = traces[i]
                span.span_id = ids[s][i]
                span.parent_span_id = ids[s - 1][i] if s else b""
                span.name = f"GET /api/{i % 8}"
                span.kind = Span.SPAN_KIND_SERVER if i % 2 else Span.SPAN_KIND_CLIENT
                span.start_time_unix_nano = start_ns + (r * 1_000_003 + i * 997) % 60_000_000_000
                span.end_time_unix_nano = span.start_time_unix_nano + rng.randint(100_000, 50_000_000)
                if i % 50 == 0:
                    span.status.code = Status.STATUS_CODE_ERROR
                attributes = [("http.method", "GET"), ("http.route", f"/api/{i % 8}")]
                if span.kind == Span.SPAN_KIND_CLIENT:
                    attributes.append(("peer.service", SERVICES[(r + s + 1) % len(SERVICES)]))
                for key, value in attributes:
                    kv = span.attributes.add()
                    kv.key, kv.value.string_value = key, value
                kv = span.attributes.add()
                kv.key, kv.value.int_value = "http.status_code", 200
        out.append(request.SerializeToString())
    return out
