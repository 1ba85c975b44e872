"""OTLP/JSON → span records, per the OTLP spec's JSON mapping: hex ids (not protobuf's base64),
integer or named enums, int64 as strings or numbers, lowerCamelCase or snake_case fields, unknown
fields ignored. One walker straight into `SpanBatchBuilder`; pure functions."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any

from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.conventions import RESOURCE_KEYS, SERVICE_NAME, SPAN_KEYS, UNKNOWN_SERVICE, AttrValue
from rca.telemetry.spans import DecodeError, DecodeResult

_KINDS = {
    f"SPAN_KIND_{name}": number
    for number, name in enumerate(("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"))
}
_STATUS_ERROR = (2, "STATUS_CODE_ERROR")
_INT64_END = 1 << 63
_ID_FIELDS = (("traceId", "trace_id"), ("spanId", "span_id"), ("parentSpanId", "parent_span_id"))
Row = tuple[bytes, bytes, bytes, str, int, int, int, bool, dict[str, AttrValue]]


def load_json(data: bytes | str, what: str) -> Any:
    """Parses a JSON body, raising `DecodeError` that names `what` and the parser's complaint."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise DecodeError(f"malformed {what}: {exc}") from None


def integer(value: object, path: str) -> int:
    """A non-negative int64 given as a JSON number or decimal string (0 when absent)."""
    if value is None:
        return 0
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise TypeError
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise DecodeError(f"{path} must be an integer, not {value!r}") from None
    if not 0 <= number < _INT64_END:
        raise DecodeError(f"{path} = {number} is outside [0, 2**63)")
    return number


def hex_id(value: object) -> bytes | None:
    """Id bytes from a hex string (b"" when absent); None when it is not hex."""
    if value is None or value == "":
        return b""
    if not isinstance(value, str):
        return None
    try:
        return bytes.fromhex(value)
    except ValueError:
        return None


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _bool(value: object) -> bool:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise TypeError(value)
    return value


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(value)
    return int(value)


def _array(value: object) -> list[AttrValue]:
    values = value.get("values", []) if isinstance(value, dict) else None
    if not isinstance(values, list):
        raise TypeError(value)
    return [any_value(v) for v in values]


_ANY: tuple[tuple[str, str, Callable[[Any], AttrValue]], ...] = (
    ("stringValue", "string_value", _text),
    ("boolValue", "bool_value", _bool),
    ("intValue", "int_value", _int),
    ("doubleValue", "double_value", float),
    ("arrayValue", "array_value", _array),
    ("bytesValue", "bytes_value", lambda v: base64.b64decode(_text(v), validate=True)),
)


def any_value(value: object) -> AttrValue:
    """The Python value of an OTLP/JSON AnyValue (arrays become lists; kvlists and empty, None).
    Raises TypeError, ValueError or binascii.Error for a value of the wrong type."""
    if not isinstance(value, dict):
        return None
    for camel, snake, convert in _ANY:
        inner = value.get(camel, value.get(snake))
        if inner is not None:
            return convert(inner)
    return None


def attributes(items: object, wanted: frozenset[str]) -> dict[str, AttrValue]:
    """The `wanted` keys of a KeyValue list; unreadable values are ignored like unknown keys."""
    out: dict[str, AttrValue] = {}
    for kv in items if isinstance(items, list) else ():
        if isinstance(kv, dict) and kv.get("key") in wanted:
            try:
                out[kv["key"]] = any_value(kv.get("value"))
            except (TypeError, ValueError, binascii.Error):
                continue
    return out


def get_field(obj: dict[str, Any], camel: str, snake: str) -> Any:
    return obj[camel] if camel in obj else obj.get(snake)


def as_object(value: object, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DecodeError(f"{path} must be an object, not {type(value).__name__}")
    return value


def as_list(value: object, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise DecodeError(f"{path} must be a list, not {type(value).__name__}")
    return value


_SIGNALS = ("Spans", "Logs", "Metrics", "Profiles")  # as OTLP names a request's resource lists


def signal_resources(document: object, signal: str) -> list[Any]:
    """The resource list of an OTLP/JSON request of `signal` (`Logs`, `Metrics`); `DecodeError`
    when the body is not an object, or holds only another signal's resources."""
    root = f"resource{signal}"
    if not isinstance(document, dict):
        raise DecodeError(
            f"OTLP/JSON {signal.lower()} body must be an object with {root}, not {type(document).__name__}"
        )
    keys = (root, f"resource_{signal.lower()}")
    others = (key for s in _SIGNALS if s != signal for key in (f"resource{s}", f"resource_{s.lower()}"))
    if not any(key in document for key in keys) and (other := [k for k in others if k in document]):
        raise DecodeError(f"OTLP/JSON with {other[0]} is not {signal.lower()} ({root})")
    return as_list(get_field(document, *keys), f"$.{root}")


def _kind(value: object, path: str) -> int:
    number = _KINDS.get(value) if isinstance(value, str) else integer(value, path)
    if number is None or number >= len(_KINDS):
        raise DecodeError(f"{path} must be a SpanKind number 0-5 or name, not {value!r}")
    return number


def _span_row(span: object, path: str) -> Row | str:
    """One span's fields, or the reason it is rejected (an id that is not hex)."""
    span = as_object(span, path)
    ids: list[bytes] = []
    for camel, snake in _ID_FIELDS:
        value = hex_id(get_field(span, camel, snake))
        if value is None:
            return f"{camel} is not a hex string"
        ids.append(value)
    trace, span_id, parent = ids
    status = as_object(span.get("status"), f"{path}.status")
    return (
        trace,
        span_id,
        parent,
        str(span.get("name") or ""),
        _kind(span.get("kind"), f"{path}.kind"),
        integer(get_field(span, "startTimeUnixNano", "start_time_unix_nano"), f"{path}.startTimeUnixNano"),
        integer(get_field(span, "endTimeUnixNano", "end_time_unix_nano"), f"{path}.endTimeUnixNano"),
        status.get("code") in _STATUS_ERROR,
        attributes(span.get("attributes"), SPAN_KEYS),
    )


def _add_resource_spans(builder: SpanBatchBuilder, resource_spans: object, path: str) -> None:
    resource_spans = as_object(resource_spans, path)
    resource_obj = as_object(resource_spans.get("resource"), f"{path}.resource")
    resource = attributes(resource_obj.get("attributes"), RESOURCE_KEYS)
    service = str(resource.get(SERVICE_NAME) or UNKNOWN_SERVICE)
    scopes = get_field(resource_spans, "scopeSpans", "scope_spans")
    for j, scope_spans in enumerate(as_list(scopes, f"{path}.scopeSpans")):
        scope_path = f"{path}.scopeSpans[{j}]"
        spans = as_list(as_object(scope_spans, scope_path).get("spans"), f"{scope_path}.spans")
        rows: list[Row] = []
        for k, span in enumerate(spans):
            row = _span_row(span, f"{scope_path}.spans[{k}]")
            if isinstance(row, str):
                builder.reject(row)
            else:
                rows.append(row)
        if rows:
            trace, span_id, parent, name, kind, start, end, error, attrs = map(list, zip(*rows, strict=True))
            builder.extend(service, resource, trace, span_id, parent, name, kind, start, end, error, attrs)


def decode_document(document: object) -> DecodeResult:
    """A parsed OTLP/JSON ExportTraceServiceRequest → span records."""
    if not isinstance(document, dict):
        raise DecodeError(f"OTLP/JSON body must be an object with resourceSpans, not {type(document).__name__}")
    builder = SpanBatchBuilder()
    resources = as_list(get_field(document, "resourceSpans", "resource_spans"), "$.resourceSpans")
    for i, resource_spans in enumerate(resources):
        _add_resource_spans(builder, resource_spans, f"$.resourceSpans[{i}]")
    return builder.build()


def decode_otlp_json(data: bytes | str) -> DecodeResult:
    """OTLP/JSON bytes → span records; `DecodeError` names the malformed field."""
    return decode_document(load_json(data, "OTLP/JSON"))
