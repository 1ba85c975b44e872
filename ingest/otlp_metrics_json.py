"""OTLP/JSON → metric data points, per the OTLP spec's JSON mapping (lowerCamelCase or snake_case
fields, int64 as strings or numbers, enums as integers or names, doubles as numbers or "NaN" /
"Infinity"), read by the rules of `ingest.otlp_metrics`. A request of the wrong shape is refused
(`DecodeError` naming the field); a point with a field of the wrong type is rejected with a
reason, and so are all the points of a resource or metric whose own fields are wrong. Pure functions."""

from __future__ import annotations

import binascii
from typing import Any

from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

from ingest.otlp_json import any_value, as_list, as_object, get_field, load_json, signal_resources
from ingest.otlp_logs import body_text
from ingest.otlp_metrics_rules import (
    BAD_SCALE,
    BAD_TEMPORALITY,
    MAX_SCALE,
    MIN_SCALE,
    NO_NAME,
    NO_RECORDED_VALUE,
    NO_SUM,
    NO_VALUE,
    Head,
    add_histogram,
    add_summary,
    exponential_buckets,
    histogram_kind,
    sum_kind,
)
from rca.telemetry.metric_rows import MetricRows
from rca.telemetry.metrics import MetricDecodeResult, MetricKind

MAX_VALUE_DEPTH = 64  # arrays and maps nested in an attribute value; deeper ones are rejected
_DATA = (
    ("gauge", "gauge"),
    ("sum", "sum"),
    ("histogram", "histogram"),
    ("exponentialHistogram", "exponential_histogram"),
    ("summary", "summary"),
)
_TEMPORALITIES: dict[str, int] = dict(AggregationTemporality.items())
_U64 = 1 << 64
Resource = dict[str, str] | str  # the attributes, or why the resource's points are rejected


class _Rejected(Exception):
    """A point (or every point of a metric) that cannot be read; the message is the reason."""


def _scalar(value: object) -> int | float | str:
    """A JSON number or string as it is, 0 when absent; TypeError for anything else."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(value)
    return value


def _uint(value: object, name: str, end: int = _U64) -> int:
    """An unsigned integer given as a JSON number or decimal string; 0 when absent."""
    try:
        number = int(_scalar(value))
    except (TypeError, ValueError, OverflowError):
        number = -1
    if not 0 <= number < end:
        raise _Rejected(f"{name} must be an integer in [0, {'2^64' if end == _U64 else end})")
    return number


def _int(value: object, name: str, bits: int) -> int:
    """A signed integer of `bits` bits given as a JSON number or decimal string; 0 when absent."""
    try:
        number = int(_scalar(value))
    except (TypeError, ValueError, OverflowError):
        number = 1 << bits
    if not -(1 << (bits - 1)) <= number < 1 << (bits - 1):
        raise _Rejected(f"{name} must be a {bits}-bit integer")
    return number


def _double(value: object, name: str) -> float:
    """A double given as a JSON number or string ("NaN", "Infinity", "-Infinity", decimal); 0 when absent."""
    try:
        return float(_scalar(value))
    except (TypeError, ValueError, OverflowError):
        raise _Rejected(f"{name} must be a number") from None


def _list(value: object, name: str) -> list[Any]:
    if not isinstance(value, list | None):
        raise _Rejected(f"{name} must be a list")
    return value or []


def _object(value: object, name: str) -> dict[str, Any]:
    if not isinstance(value, dict | None):
        raise _Rejected(f"{name} must be an object")
    return value or {}


def _value(value: object, depth: int) -> Any:
    """The Python value of an AnyValue, maps and arrays included. Raises TypeError, ValueError
    or binascii.Error for a value of the wrong type, `_Rejected` past MAX_VALUE_DEPTH."""
    if not isinstance(value, dict):
        raise TypeError(value)
    if depth > MAX_VALUE_DEPTH:
        raise _Rejected(f"attribute value nests deeper than {MAX_VALUE_DEPTH} levels")
    kvlist = get_field(value, "kvlistValue", "kvlist_value")
    if kvlist is not None:
        if not isinstance(kvlist, dict):
            raise TypeError(kvlist)
        return dict(_pairs(kvlist.get("values"), depth + 1))
    array = get_field(value, "arrayValue", "array_value")
    if array is not None:
        values = array.get("values", []) if isinstance(array, dict) else None
        if not isinstance(values, list):
            raise TypeError(array)
        return [_value(v, depth + 1) for v in values]
    return any_value(value)


def _pairs(items: object, depth: int) -> list[tuple[str, Any]]:
    """(key, value) of a KeyValue list; raises like `_value`."""
    if not isinstance(items, list | None):
        raise TypeError(items)
    pairs = []
    for kv in items or ():
        if not isinstance(kv, dict) or not isinstance(kv.get("key", ""), str):
            raise TypeError(kv)
        value = kv.get("value")
        pairs.append((kv.get("key", ""), None if value is None else _value(value, depth)))
    return pairs


def _attributes(items: object) -> dict[str, str]:
    """A KeyValue list as text (`ingest.otlp_metrics`); `_Rejected` when it cannot be read."""
    try:
        return {key: body_text(value) for key, value in _pairs(items, 0)}
    except (TypeError, ValueError, binascii.Error):
        raise _Rejected("attributes must be a list of KeyValue with AnyValue values") from None


def _number(rows: MetricRows, head: Head, p: dict[str, Any]) -> None:
    value = get_field(p, "asDouble", "as_double")
    if value is not None:
        rows.add(*head, _double(value, "asDouble"))
        return
    number = get_field(p, "asInt", "as_int")
    if number is None:
        raise _Rejected(NO_VALUE)
    rows.add(*head, _int(number, "asInt", 64))


def _histogram(rows: MetricRows, head: Head, p: dict[str, Any]) -> None:
    if p.get("sum") is None:
        raise _Rejected(NO_SUM)
    total = (_double(p["sum"], "sum"), float(_uint(p.get("count"), "count")))
    bounds = [
        _double(b, "explicitBounds") for b in _list(get_field(p, "explicitBounds", "explicit_bounds"), "explicitBounds")
    ]
    counts = [_uint(c, "bucketCounts") for c in _list(get_field(p, "bucketCounts", "bucket_counts"), "bucketCounts")]
    add_histogram(rows, head, total, (bounds, counts))


def _exponential(rows: MetricRows, head: Head, p: dict[str, Any]) -> None:
    if p.get("sum") is None:
        raise _Rejected(NO_SUM)
    scale = _int(p.get("scale"), "scale", 32)
    if not MIN_SCALE <= scale <= MAX_SCALE:
        raise _Rejected(BAD_SCALE)
    total = (_double(p["sum"], "sum"), float(_uint(p.get("count"), "count")))
    buckets = []
    for side in ("positive", "negative"):
        found = _object(p.get(side), side)
        counts = _list(get_field(found, "bucketCounts", "bucket_counts"), f"{side}.bucketCounts")
        buckets.append(
            (_int(found.get("offset"), f"{side}.offset", 32), [_uint(c, f"{side}.bucketCounts") for c in counts])
        )
    (offset, positive), (_, negative) = buckets
    zero = _uint(get_field(p, "zeroCount", "zero_count"), "zeroCount")
    add_histogram(rows, head, total, exponential_buckets(scale, zero, offset, positive, sum(negative)))


def _summary(rows: MetricRows, head: Head, p: dict[str, Any]) -> None:
    quantiles = []
    for q in _list(get_field(p, "quantileValues", "quantile_values"), "quantileValues"):
        q = _object(q, "quantileValues[]")
        quantiles.append((_double(q.get("quantile"), "quantile"), _double(q.get("value"), "value")))
    add_summary(rows, head, (_double(p.get("sum"), "sum"), float(_uint(p.get("count"), "count"))), quantiles)


_READERS = {
    "gauge": _number,
    "sum": _number,
    "histogram": _histogram,
    "exponential_histogram": _exponential,
    "summary": _summary,
}


def _point(
    rows: MetricRows, name: str, data: str, kind: MetricKind, resource: dict[str, str], p: dict[str, Any]
) -> None:
    """One point into `rows` (none for a staleness marker); `_Rejected` when it cannot be read."""
    if _uint(p.get("flags"), "flags", 1 << 32) & NO_RECORDED_VALUE:
        return
    attributes = _attributes(p.get("attributes"))
    time = _uint(get_field(p, "timeUnixNano", "time_unix_nano"), "timeUnixNano")
    start = _uint(get_field(p, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano")
    _READERS[data](rows, (name, kind, resource, attributes, time, start), p)


def _kind(name: object, data: str, body: dict[str, Any]) -> MetricKind:
    """How the metric's points read; `_Rejected` (for all of them) when they cannot be read."""
    if not isinstance(name, str) or not name:
        raise _Rejected(NO_NAME if not name else "name must be a string")
    if data in ("gauge", "summary"):
        return MetricKind.HISTOGRAM_CUMULATIVE if data == "summary" else MetricKind.GAUGE
    value = get_field(body, "aggregationTemporality", "aggregation_temporality")
    temporality = _TEMPORALITIES.get(value, -1) if isinstance(value, str) else value
    if isinstance(temporality, bool) or not isinstance(temporality, int | None):
        raise _Rejected(BAD_TEMPORALITY)
    if data == "sum":
        monotonic = get_field(body, "isMonotonic", "is_monotonic")
        if not isinstance(monotonic, bool | None):
            raise _Rejected("isMonotonic must be a boolean")
        kind = sum_kind(temporality or 0, bool(monotonic))
    else:
        kind = histogram_kind(temporality or 0)
    if isinstance(kind, str):
        raise _Rejected(kind)
    return kind


def _add_metric(rows: MetricRows, resource: Resource, metric: dict[str, Any], path: str) -> None:
    found = [(camel, snake) for camel, snake in _DATA if get_field(metric, camel, snake) is not None]
    if not found:
        return
    camel, data = found[0]
    body = as_object(get_field(metric, camel, data), f"{path}.{camel}")
    points = as_list(get_field(body, "dataPoints", "data_points"), f"{path}.{camel}.dataPoints")
    objects = [as_object(p, f"{path}.{camel}.dataPoints[{k}]") for k, p in enumerate(points)]
    try:
        if isinstance(resource, str):
            raise _Rejected(resource)
        kind = _kind(metric.get("name"), data, body)
    except _Rejected as exc:
        rows.reject(str(exc), len(objects))
        return
    for p in objects:
        try:
            _point(rows, metric["name"], data, kind, resource, p)
        except _Rejected as exc:
            rows.reject(str(exc))


def _add_resource_metrics(rows: MetricRows, resource_metrics: object, path: str) -> None:
    resource_metrics = as_object(resource_metrics, path)
    resource_obj = as_object(resource_metrics.get("resource"), f"{path}.resource")
    try:
        resource: Resource = _attributes(resource_obj.get("attributes"))
    except _Rejected as exc:
        resource = f"resource {exc}"
    scopes = as_list(get_field(resource_metrics, "scopeMetrics", "scope_metrics"), f"{path}.scopeMetrics")
    for j, scope_metrics in enumerate(scopes):
        scope_path = f"{path}.scopeMetrics[{j}]"
        metrics = as_list(as_object(scope_metrics, scope_path).get("metrics"), f"{scope_path}.metrics")
        for k, metric in enumerate(metrics):
            metric_path = f"{scope_path}.metrics[{k}]"
            _add_metric(rows, resource, as_object(metric, metric_path), metric_path)


def decode_metrics_document(document: object) -> MetricDecodeResult:
    """A parsed OTLP/JSON ExportMetricsServiceRequest → data points."""
    resources = signal_resources(document, "Metrics")
    rows = MetricRows()
    for i, resource_metrics in enumerate(resources):
        _add_resource_metrics(rows, resource_metrics, f"$.resourceMetrics[{i}]")
    return rows.build()


def decode_metrics_json(data: bytes | str) -> MetricDecodeResult:
    """OTLP/JSON bytes → data points; `DecodeError` names the malformed field."""
    return decode_metrics_document(load_json(data, "OTLP/JSON"))
