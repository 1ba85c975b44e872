"""OTLP protobuf → span records. Pure functions: no transport, no global state."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ingest import otlp_scan as scan
from rca.telemetry.builder import SpanBatchBuilder, SpanColumns, assemble, attribute_effect, reads_every_span
from rca.telemetry.conventions import (
    PEER_KEYS,
    RESOURCE_KEYS,
    SERVICE_NAME,
    SPAN_KEYS,
    UNKNOWN_SERVICE,
    AttrValue,
    instance_of,
)
from rca.telemetry.spans import CALLER_KINDS, N_SIGNALS, DecodeError, DecodeResult

STATUS_ERROR = 2
_NONE: dict[str, AttrValue] = {}
_SPAN_KEY_BYTES = tuple(sorted(key.encode() for key in SPAN_KEYS))
_KEYS = np.frombuffer(b"".join(_SPAN_KEY_BYTES), np.uint8)
_KEY_ENDS = np.cumsum([len(key) for key in _SPAN_KEY_BYTES], dtype=np.int64)
_CALLER_KINDS = np.asarray(sorted(CALLER_KINDS), np.int64)


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
    """OTLP protobuf bytes → span records: upb checks the bytes (`DecodeError` when malformed),
    the wire scanner reads the spans; upb's objects are read where the scanner cannot."""
    request = parse_request(data)
    scanned = _scanned(data, request)
    return scanned if scanned is not None else extract(request, attribute_kinds(data))


def decode_reference(data: bytes) -> DecodeResult:
    """The same records read through upb's objects only (the scanner's fallback and yardstick)."""
    return extract(parse_request(data), attribute_kinds(data))


def _scanned(data: bytes, request: ExportTraceServiceRequest) -> DecodeResult | None:
    """Span records of a parsed request by the wire scanner; None if it cannot be sure."""
    n = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    if n == 0:
        return None
    u = np.zeros((n, scan.N_U), np.uint64)
    i = np.zeros((n, scan.N_I), np.int64)
    t = np.zeros((n, scan.N_T), np.int64)
    n_names, _ = scan.scan(np.frombuffer(data, np.uint8), n, _KEYS, _KEY_ENDS, u, i, t)
    if n_names < 0:
        return None
    strings: dict[str, int] = {}

    def intern(text: str) -> int:
        return strings.setdefault(text, len(strings))

    resources = [
        {kv.key: any_value(kv.value) for kv in rs.resource.attributes if kv.key in RESOURCE_KEYS}
        for rs in request.resource_spans
    ]
    service_of = np.asarray([intern(str(r.get(SERVICE_NAME) or UNKNOWN_SERVICE)) for r in resources], np.int32)
    instance_of_resource = np.asarray(
        [-1 if (instance := instance_of(r)) is None else intern(instance) for r in resources], np.int32
    )
    names = [data[o : o + length].decode() for o, length in t[:n_names, : scan.T_NAME_LEN + 1].tolist()]
    operation_of = np.fromiter(map(intern, names), np.int32, n_names)
    every = np.asarray([reads_every_span(r) for r in resources], np.bool_)
    combo, firsts = scan.combinations(i, every, _CALLER_KINDS)
    combo_peer = np.full(firsts.shape[0], -1, np.int32)
    combo_resource = np.full(firsts.shape[0], -1, np.int32)
    combo_signals = np.full((firsts.shape[0], N_SIGNALS), math.nan)
    for j, row in enumerate(firsts.tolist()):
        g, kind, rs = (int(i[row, c]) for c in (scan.I_GROUP, scan.I_KIND, scan.I_RESOURCE))
        attrs = _wanted(_span_at(request, i[int(t[g, scan.T_GROUP_REP])])) if g >= 0 else _NONE
        effect = attribute_effect(kind, attrs, resources[rs])
        if effect.peer is not None:
            combo_peer[j] = intern(effect.peer)
        if effect.resource is not None:
            combo_resource[j] = intern(effect.resource)
        if effect.signals is not None:
            combo_signals[j] = effect.signals
    service, operation, peer, resource, signals, error = scan.spread(
        i, combo, service_of, operation_of, combo_peer, combo_resource, combo_signals, STATUS_ERROR
    )
    columns = SpanColumns(
        trace_id=u[:, scan.U_TRACE_HI : scan.U_TRACE_LO + 1],
        trace_id_len=i[:, scan.I_TRACE_LEN],
        span_id=u[:, scan.U_SPAN],
        span_id_len=i[:, scan.I_SPAN_LEN],
        parent_id=u[:, scan.U_PARENT],
        parent_id_len=i[:, scan.I_PARENT_LEN],
        start_ns=u[:, scan.U_START],
        end_ns=u[:, scan.U_END],
        kind=i[:, scan.I_KIND],
        error=error,
        service=service,
        operation=operation,
        peer=peer,
        resource=resource,
        instance=instance_of_resource[i[:, scan.I_RESOURCE]],
        signals=signals,
        strings=tuple(strings),
    )
    return assemble(columns)


def _span_at(request: ExportTraceServiceRequest, row: npt.NDArray[np.int64]) -> Span:
    resource, scope, index = (int(row[c]) for c in (scan.I_RESOURCE, scan.I_SCOPE, scan.I_INDEX))
    span: Span = request.resource_spans[resource].scope_spans[scope].spans[index]
    return span


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
