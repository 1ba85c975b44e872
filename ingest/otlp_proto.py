"""OTLP protobuf → span records. Pure functions: no transport, no global state."""

from __future__ import annotations

from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from rca.builder import SpanBatchBuilder
from rca.conventions import PEER_KEYS, RESOURCE_KEYS, SERVICE_NAME, SPAN_KEYS, UNKNOWN_SERVICE, AttrValue
from rca.spans import CALLER_KINDS, DecodeError, DecodeResult

STATUS_ERROR = 2
_NONE: dict[str, AttrValue] = {}
_SPAN_KEY_BYTES = tuple(key.encode() for key in SPAN_KEYS)


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


def _wanted(span: Span) -> dict[str, AttrValue]:
    return {kv.key: any_value(kv.value) for kv in span.attributes if kv.key in SPAN_KEYS}


def extract(request: ExportTraceServiceRequest, read_kinds: frozenset[int] | None = None) -> DecodeResult:
    """Span records of a parsed request, read column by column; invalid spans are rejected
    with a reason by the builder. Attributes are read only for spans of `read_kinds` (all
    spans when None): reading them is most of the cost of decoding."""
    builder = SpanBatchBuilder()
    every, kinds = read_kinds is None, read_kinds or frozenset()
    for resource_spans in request.resource_spans:
        resource = {kv.key: any_value(kv.value) for kv in resource_spans.resource.attributes if kv.key in RESOURCE_KEYS}
        service = str(resource.get(SERVICE_NAME) or UNKNOWN_SERVICE)
        for scope_spans in resource_spans.scope_spans:
            spans = scope_spans.spans
            if not spans:
                continue
            rows = [
                (
                    s.trace_id,
                    s.span_id,
                    s.parent_span_id,
                    s.name,
                    s.kind,
                    s.start_time_unix_nano,
                    s.end_time_unix_nano,
                    s.status.code == STATUS_ERROR,
                    _wanted(s) if s.attributes and (every or s.kind in kinds) else _NONE,
                )
                for s in spans
            ]
            trace, span, parent, name, kind, start, end, error, attributes = map(list, zip(*rows, strict=True))
            builder.extend(service, resource, trace, span, parent, name, kind, start, end, error, attributes)
    return builder.build()


def decode_protobuf(data: bytes) -> DecodeResult:
    """OTLP protobuf bytes → span records."""
    return extract(parse_request(data), attribute_kinds(data))


def attribute_kinds(data: bytes) -> frozenset[int] | None:
    """Which span kinds can hold attributes rca reads, judged by the keys the raw bytes contain:
    none at all; only peer keys (callers name their callees: client, producer, unmarked spans);
    or anything else (None: read every span)."""
    present = [key for key in _SPAN_KEY_BYTES if key in data]
    if not present:
        return frozenset()
    if all(key.decode() in PEER_KEYS for key in present):
        return CALLER_KINDS
    return None
