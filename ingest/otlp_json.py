"""OTLP/JSON → span records. Hex ids, integer or named enums, int64 as strings (the OTLP spec's
JSON mapping). Pure functions."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from rca.builder import SpanBatchBuilder
from rca.conventions import RESOURCE_KEYS, SERVICE_NAME, SPAN_KEYS, UNKNOWN_SERVICE, AttrValue
from rca.spans import DecodeError, DecodeResult

_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_ERROR = (2, "2", "STATUS_CODE_ERROR")


def _field(obj: Mapping[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    return obj.get(camel, obj.get(snake, default))


def _list(obj: Mapping[str, Any], camel: str, snake: str, path: str) -> list[Any]:
    value = _field(obj, camel, snake, [])
    if not isinstance(value, list):
        raise DecodeError(f"{path}.{camel} must be a list")
    return value


def any_value(value: Any) -> AttrValue:
    """The Python value of an OTLP/JSON AnyValue object."""
    if not isinstance(value, dict) or not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind in ("intValue", "int_value"):
        return int(inner)
    if kind in ("doubleValue", "double_value"):
        return float(inner)
    if kind in ("arrayValue", "array_value"):
        return [any_value(v) for v in (inner or {}).get("values", [])]
    if kind in ("bytesValue", "bytes_value"):
        return base64.b64decode(inner)
    if kind in ("stringValue", "string_value", "boolValue", "bool_value"):
        result: AttrValue = inner
        return result
    return None


def attributes(items: Any, wanted: frozenset[str]) -> dict[str, AttrValue]:
    if not isinstance(items, list):
        return {}
    out = {}
    for kv in items:
        if isinstance(kv, dict) and kv.get("key") in wanted:
            try:
                out[kv["key"]] = any_value(kv.get("value"))
            except (ValueError, TypeError, binascii.Error):
                continue  # an unreadable attribute value is ignored like an unknown one
    return out


def _hex(text: Any) -> bytes:
    """Id bytes from hex; invalid hex gives bytes of the wrong length, rejected by the builder."""
    try:
        return bytes.fromhex(text) if isinstance(text, str) else b"?"
    except ValueError:
        return b"?"


def _span_row(span: Any, path: str) -> tuple[bytes, bytes, bytes, str, int, int, int, bool, dict[str, AttrValue]]:
    if not isinstance(span, dict):
        raise DecodeError(f"{path} must be an object")
    kind = _field(span, "kind", "kind", 0)
    status = _field(span, "status", "status", {}) or {}
    try:
        start = int(_field(span, "startTimeUnixNano", "start_time_unix_nano", 0))
        end = int(_field(span, "endTimeUnixNano", "end_time_unix_nano", 0))
        kind_number = _KINDS[kind] if isinstance(kind, str) else int(kind)
    except (ValueError, TypeError, KeyError) as exc:
        raise DecodeError(f"{path}: bad number or enum: {exc}") from None
    parent = _field(span, "parentSpanId", "parent_span_id", "")
    return (
        _hex(_field(span, "traceId", "trace_id")),
        _hex(_field(span, "spanId", "span_id")),
        _hex(parent) if parent else b"",
        str(span.get("name", "")),
        kind_number,
        start,
        end,
        isinstance(status, dict) and status.get("code") in _ERROR,
        attributes(span.get("attributes"), SPAN_KEYS),
    )


def decode_document(document: Any) -> DecodeResult:
    """A parsed OTLP/JSON ExportTraceServiceRequest → span records."""
    if not isinstance(document, dict):
        raise DecodeError("OTLP/JSON body must be an object with resourceSpans")
    builder = SpanBatchBuilder()
    for i, rs in enumerate(_list(document, "resourceSpans", "resource_spans", "$")):
        path = f"$.resourceSpans[{i}]"
        if not isinstance(rs, dict):
            raise DecodeError(f"{path} must be an object")
        resource = attributes((rs.get("resource") or {}).get("attributes"), RESOURCE_KEYS)
        service = str(resource.get(SERVICE_NAME) or UNKNOWN_SERVICE)
        for j, ss in enumerate(_list(rs, "scopeSpans", "scope_spans", path)):
            spath = f"{path}.scopeSpans[{j}]"
            if not isinstance(ss, dict):
                raise DecodeError(f"{spath} must be an object")
            rows = [_span_row(s, f"{spath}.spans[{k}]") for k, s in enumerate(_list(ss, "spans", "spans", spath))]
            if rows:
                columns = [list(c) for c in zip(*rows, strict=True)]
                builder.extend(service, resource, *columns)
    return builder.build()


def decode_otlp_json(data: bytes | str | Mapping[str, Any]) -> DecodeResult:
    """OTLP/JSON bytes (or an already parsed document) → span records."""
    if isinstance(data, bytes | str):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise DecodeError(f"malformed OTLP/JSON: {exc}") from exc
    return decode_document(data)
