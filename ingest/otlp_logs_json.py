"""OTLP/JSON → log records, per the OTLP spec's JSON mapping (hex ids, integer or named enums,
int64 as strings or numbers, lowerCamelCase or snake_case fields), through the assembly the
protobuf decoder uses. A request of the wrong shape is refused (`DecodeError` naming the field); a
record with a field of the wrong type is rejected with a reason. Pure functions."""

from __future__ import annotations

import binascii
from typing import Any

from opentelemetry.proto.logs.v1.logs_pb2 import SeverityNumber

from ingest.otlp_json import (
    any_value,
    as_list,
    as_object,
    attributes,
    get_field,
    hex_id,
    integer,
    load_json,
    signal_resources,
)
from ingest.otlp_logs import LogRecordColumns, body_text
from rca.telemetry.logs import LOG_RESOURCE_KEYS, LogDecodeResult, log_service
from rca.telemetry.spans import DecodeError

MAX_BODY_DEPTH = 64  # arrays and maps nested in a body; deeper bodies are rejected
_SEVERITY_NAMES: dict[str, int] = dict(SeverityNumber.items())
_TIMES = (("timeUnixNano", "time_unix_nano"), ("observedTimeUnixNano", "observed_time_unix_nano"))
_IDS = (("traceId", "trace_id"), ("spanId", "span_id"))
Fields = tuple[int, int, bytes, bytes, int, str, str]


class _TooDeep(Exception):
    pass


def _values(container: object) -> list[Any]:
    values = container.get("values", []) if isinstance(container, dict) else None
    if not isinstance(values, list):
        raise TypeError(container)
    return values


def _body_value(value: object, depth: int) -> Any:
    """The Python value of a body AnyValue, maps and arrays included. Raises TypeError,
    ValueError or binascii.Error for a value of the wrong type, `_TooDeep` past MAX_BODY_DEPTH."""
    if not isinstance(value, dict):
        raise TypeError(value)
    if depth > MAX_BODY_DEPTH:
        raise _TooDeep
    kvlist = get_field(value, "kvlistValue", "kvlist_value")
    if kvlist is not None:
        pairs = [(kv.get("key"), kv.get("value")) if isinstance(kv, dict) else (None, None) for kv in _values(kvlist)]
        if not all(isinstance(key, str) for key, _ in pairs):
            raise TypeError(kvlist)
        return {key: None if v is None else _body_value(v, depth + 1) for key, v in pairs}
    array = get_field(value, "arrayValue", "array_value")
    if array is not None:
        return [_body_value(v, depth + 1) for v in _values(array)]
    return any_value(value)


def _severity(value: object) -> int:
    if isinstance(value, str) and value in _SEVERITY_NAMES:
        return _SEVERITY_NAMES[value]
    if isinstance(value, bool) or not isinstance(value, int | str | None):
        raise TypeError(value)
    return min(max(int(value or 0), 0), 24)  # out of range reads as the nearest SeverityNumber


def _record(record: dict[str, Any]) -> Fields | str:
    """One record's fields, or the reason it is rejected."""
    times: list[int] = []
    for camel, snake in _TIMES:
        try:
            times.append(integer(get_field(record, camel, snake), camel))
        except DecodeError:
            return f"{camel} must be an integer in [0, 2^63)"
    ids: list[bytes] = []
    for camel, snake in _IDS:
        value = hex_id(get_field(record, camel, snake))
        if value is None:
            return f"{camel} is not a hex string"
        ids.append(value)
    try:
        number = _severity(get_field(record, "severityNumber", "severity_number"))
    except (TypeError, ValueError):
        return "severityNumber must be an integer or a SeverityNumber name"
    text = get_field(record, "severityText", "severity_text") or ""
    if not isinstance(text, str):
        return "severityText must be a string"
    body = record.get("body")
    try:
        body = "" if body is None else body_text(_body_value(body, 0))
    except _TooDeep:
        return f"body nests deeper than {MAX_BODY_DEPTH} levels"
    except (TypeError, ValueError, binascii.Error):
        return "body must be an AnyValue"
    return times[0], times[1], ids[0], ids[1], number, text, body


def _add_resource_logs(rows: LogRecordColumns, resource_logs: object, path: str) -> None:
    resource_logs = as_object(resource_logs, path)
    resource = as_object(resource_logs.get("resource"), f"{path}.resource")
    service = log_service(attributes(resource.get("attributes"), LOG_RESOURCE_KEYS))
    scopes = as_list(get_field(resource_logs, "scopeLogs", "scope_logs"), f"{path}.scopeLogs")
    for j, scope_logs in enumerate(scopes):
        scope_path = f"{path}.scopeLogs[{j}]"
        records = get_field(as_object(scope_logs, scope_path), "logRecords", "log_records")
        fields: list[Fields] = []
        for k, record in enumerate(as_list(records, f"{scope_path}.logRecords")):
            row = _record(as_object(record, f"{scope_path}.logRecords[{k}]"))
            if isinstance(row, str):
                rows.reject(row)
            else:
                fields.append(row)
        if fields:
            times, observed, trace, span, numbers, texts, bodies = map(list, zip(*fields, strict=True))
            rows.extend(service, times, observed, trace, span, numbers, texts, bodies)


def decode_logs_document(document: object) -> LogDecodeResult:
    """A parsed OTLP/JSON ExportLogsServiceRequest → log records."""
    resources = signal_resources(document, "Logs")
    rows = LogRecordColumns()
    for i, resource_logs in enumerate(resources):
        _add_resource_logs(rows, resource_logs, f"$.resourceLogs[{i}]")
    return rows.build()


def decode_logs_json(data: bytes | str) -> LogDecodeResult:
    """OTLP/JSON bytes → log records; `DecodeError` names the malformed field."""
    return decode_logs_document(load_json(data, "OTLP/JSON"))
