"""Jaeger JSON (the UI/v1 query format) → span records: hex ids that may drop leading zeros,
parents from `references`, services from `processes`, times in microseconds, typed tags."""

from __future__ import annotations

from typing import Any

from ingest.otlp_json import attributes, hex_id, integer, load_json
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.conventions import RESOURCE_KEYS, SPAN_KEYS, UNKNOWN_SERVICE, AttrValue
from rca.telemetry.spans import DecodeError, DecodeResult

_KINDS = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
_ANY_FIELD = {
    "string": "stringValue",
    "bool": "boolValue",
    "int64": "intValue",
    "float64": "doubleValue",
    "binary": "bytesValue",
}
_PYTHON_TYPE = {bool: "bool", int: "int64", float: "float64"}
_STATUS_KEYS = frozenset({"error", "span.kind", "otel.status_code"})
_TAG_KEYS = SPAN_KEYS | _STATUS_KEYS


def _tags(tags: object, wanted: frozenset[str]) -> dict[str, AttrValue]:
    """The `wanted` tags `[{key, type, value}]`, values converted by their Jaeger type."""
    items = tags if isinstance(tags, list) else []
    return attributes([_key_value(t) for t in items if isinstance(t, dict) and t.get("key") in wanted], wanted)


def _key_value(tag: dict[str, Any]) -> dict[str, Any]:
    """A Jaeger tag as an OTLP/JSON KeyValue (an untyped tag is typed by its JSON value)."""
    value = tag.get("value")
    kind = str(tag.get("type") or _PYTHON_TYPE.get(type(value), "string")).lower()
    return {"key": tag["key"], "value": {_ANY_FIELD.get(kind, "stringValue"): value}}


def _id(value: object, width: int) -> bytes | None:
    """Hex id left-padded to `width` bytes (Jaeger drops leading zeros; 64-bit trace ids)."""
    return hex_id(value.rjust(2 * width, "0") if isinstance(value, str) and value else value)


def _parent(span: dict[str, Any], trace_id: bytes | None, path: str) -> object:
    """The parent span id: a CHILD_OF reference in the same trace, else FOLLOWS_FROM, else
    `parentSpanID` (references to other traces are not parents, as in Jaeger)."""
    references = span.get("references") or []
    if not isinstance(references, list):
        raise DecodeError(f"{path}.references must be a list")
    same_trace = [
        ref
        for ref in references
        if isinstance(ref, dict) and (ref.get("traceID") is None or _id(ref.get("traceID"), 16) == trace_id)
    ]
    for wanted in ("CHILD_OF", "FOLLOWS_FROM"):
        for ref in same_trace:
            if ref.get("refType") == wanted:
                return ref.get("spanID")
    return span.get("parentSpanID")


def _process(span: dict[str, Any], processes: dict[str, Any], path: str) -> dict[str, Any]:
    process = span.get("process")
    if process is None:
        pid = span.get("processID")
        if pid is None:
            return {}
        if not isinstance(pid, str) or pid not in processes:
            raise DecodeError(f"{path}.processID {pid!r} is not in the trace's processes")
        process = processes[pid]
    if not isinstance(process, dict):
        raise DecodeError(f"{path}.process must be an object")
    return process


def _ids(span: dict[str, Any], trace: dict[str, Any], path: str) -> list[bytes] | str:
    """Trace, span and parent ids, or the reason the span is rejected (an id that is not hex)."""
    trace_id = _id(span.get("traceID", trace.get("traceID")), 16)
    ids: list[bytes] = []
    for name, value in (
        ("traceID", trace_id),
        ("spanID", _id(span.get("spanID"), 8)),
        ("parent spanID", _id(_parent(span, trace_id, path), 8)),
    ):
        if value is None:
            return f"{name} is not a hex string"
        ids.append(value)
    return ids


def _add_span(builder: SpanBatchBuilder, span: object, trace: dict[str, Any], path: str) -> None:
    if not isinstance(span, dict):
        raise DecodeError(f"{path} must be an object")
    ids = _ids(span, trace, path)
    if isinstance(ids, str):
        builder.reject(ids)
        return
    process = _process(span, trace.get("processes") or {}, path)
    tags = _tags(span.get("tags"), _TAG_KEYS)
    start_us = integer(span.get("startTime"), f"{path}.startTime")
    duration_us = integer(span.get("duration"), f"{path}.duration")
    trace_id, span_id, parent_id = ids
    builder.add(
        trace_id,
        span_id,
        parent_id,
        str(process.get("serviceName") or UNKNOWN_SERVICE),
        str(span.get("operationName") or ""),
        _KINDS.get(str(tags.get("span.kind", "")).lower(), 0),
        start_us * 1000,
        integer((start_us + duration_us) * 1000, f"{path}.duration"),
        tags.get("error") is True or tags.get("otel.status_code") == "ERROR",
        {key: value for key, value in tags.items() if key not in _STATUS_KEYS},
        _tags(process.get("tags"), RESOURCE_KEYS),
    )


def _traces(document: object) -> tuple[list[Any], str]:
    """The traces of `{"data": [...]}`, a list of traces, one trace, or a bare list of spans,
    with the JSON path they sit at."""
    if isinstance(document, dict) and "data" in document:
        if not isinstance(document["data"], list):
            raise DecodeError("$.data must be a list of traces")
        return document["data"], "$.data"
    if isinstance(document, list) and document and all(isinstance(x, dict) and "spanID" in x for x in document):
        return [{"spans": document}], "$"
    if isinstance(document, list):
        return document, "$"
    return [document], ""


def decode_jaeger_document(document: object) -> DecodeResult:
    """A parsed Jaeger JSON document → span records; `DecodeError` names the malformed field."""
    builder = SpanBatchBuilder()
    traces, base = _traces(document)
    for i, trace in enumerate(traces):
        path = f"{base}[{i}]" if base else "$"
        if not isinstance(trace, dict) or not isinstance(trace.get("spans"), list):
            raise DecodeError(f"{path} must be a trace object with a spans list")
        if not isinstance(trace.get("processes") or {}, dict):
            raise DecodeError(f"{path}.processes must be an object")
        for k, span in enumerate(trace["spans"]):
            _add_span(builder, span, trace, f"{path}.spans[{k}]")
    return builder.build()


def decode_jaeger_json(data: bytes | str) -> DecodeResult:
    """Jaeger JSON bytes → span records."""
    return decode_jaeger_document(load_json(data, "Jaeger JSON"))
