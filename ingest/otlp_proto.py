"""OTLP protobuf → span records. Pure functions: no transport, no global state."""

from __future__ import annotations

from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from rca.builder import SpanBatchBuilder
from rca.conventions import RESOURCE_KEYS, SERVICE_NAME, SPAN_KEYS, UNKNOWN_SERVICE, AttrValue
from rca.spans import DecodeError, DecodeResult

STATUS_ERROR = 2


def any_value(value: AnyValue) -> AttrValue:
    """The Python value of an OTLP AnyValue (arrays become lists)."""
    field = value.WhichOneof("value")
    if field is None:
        return None
    if field == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if field == "kvlist_value":
        return None
    result: AttrValue = getattr(value, field)
    return result


def parse_request(data: bytes) -> ExportTraceServiceRequest:
    """Parses protobuf bytes, raising `DecodeError` with the parser's message."""
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except ProtobufDecodeError as exc:
        raise DecodeError(f"malformed ExportTraceServiceRequest protobuf: {exc}") from exc
    return request


def extract(request: ExportTraceServiceRequest) -> DecodeResult:
    """Span records of a parsed request; invalid spans are rejected with a reason."""
    builder = SpanBatchBuilder()
    add = builder.add
    for resource_spans in request.resource_spans:
        resource = {
            kv.key: any_value(kv.value)
            for kv in resource_spans.resource.attributes
            if kv.key in RESOURCE_KEYS
        }
        service = str(resource.get(SERVICE_NAME) or UNKNOWN_SERVICE)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                attributes = (
                    {kv.key: any_value(kv.value) for kv in span.attributes if kv.key in SPAN_KEYS}
                    if span.attributes
                    else {}
                )
                add(
                    span.trace_id,
                    span.span_id,
                    span.parent_span_id,
                    service,
                    span.name,
                    span.kind,
                    span.start_time_unix_nano,
                    span.end_time_unix_nano,
                    span.status.code == STATUS_ERROR,
                    attributes,
                    resource,
                )
    return builder.build()


def decode_protobuf(data: bytes) -> DecodeResult:
    """OTLP protobuf bytes → span records."""
    return extract(parse_request(data))
