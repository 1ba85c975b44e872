"""Helpers that build OTLP metric export requests by hand for tests, read them back as OTLP/JSON
or through every decoder, and list a batch's rows."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    ExponentialHistogramDataPoint,
    HistogramDataPoint,
    Metric,
    NumberDataPoint,
    SummaryDataPoint,
)

from ingest.otlp_metrics import decode_metrics_protobuf
from ingest.otlp_metrics_json import decode_metrics_json
from rca.telemetry.metrics import MetricBatch, MetricDecodeResult, MetricKind

T0 = 1_767_000_000_000_000_000
S0 = T0 - 60_000_000_000
DELTA, CUMULATIVE = 1, 2


def any_value(value: object) -> AnyValue:
    out = AnyValue()
    if isinstance(value, dict):
        for key, inner in value.items():
            out.kvlist_value.values.add(key=key).value.CopyFrom(any_value(inner))
    elif isinstance(value, list):
        out.array_value.values.extend(any_value(v) for v in value)
    elif isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int):
        out.int_value = value
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, bytes):
        out.bytes_value = value
    elif isinstance(value, str):
        out.string_value = value
    return out


def key_values(attributes: Mapping[str, object] | None) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in (attributes or {}).items()]


def number(value: float | None, attributes: Mapping[str, object] | None = None, **fields: Any) -> NumberDataPoint:
    """A number point: an int as `as_int`, a float as `as_double`, None as no value."""
    fields.setdefault("time_unix_nano", T0)
    fields.setdefault("start_time_unix_nano", S0)
    point = NumberDataPoint(attributes=key_values(attributes), **fields)
    if isinstance(value, int):
        point.as_int = value
    elif value is not None:
        point.as_double = value
    return point


def histogram_point(
    total: float | None, count: int, bounds: Iterable[float] = (), counts: Iterable[int] = (), **fields: Any
) -> HistogramDataPoint:
    fields.setdefault("time_unix_nano", T0)
    fields.setdefault("start_time_unix_nano", S0)
    return HistogramDataPoint(sum=total, count=count, explicit_bounds=bounds, bucket_counts=counts, **fields)


def exponential_point(
    total: float | None, count: int, scale: int, zero: int, offset: int, positive: list[int], **fields: Any
) -> ExponentialHistogramDataPoint:
    fields.setdefault("time_unix_nano", T0)
    fields.setdefault("start_time_unix_nano", S0)
    point = ExponentialHistogramDataPoint(sum=total, count=count, scale=scale, zero_count=zero, **fields)
    point.positive.offset = offset
    point.positive.bucket_counts.extend(positive)
    return point


def summary_point(total: float, count: int, quantiles: Mapping[float, float], **fields: Any) -> SummaryDataPoint:
    fields.setdefault("time_unix_nano", T0)
    fields.setdefault("start_time_unix_nano", S0)
    point = SummaryDataPoint(sum=total, count=count, **fields)
    for q, value in quantiles.items():
        point.quantile_values.add(quantile=q, value=value)
    return point


def metric(name: str, data: str, *points: Any, temporality: int = 0, monotonic: bool = False) -> Metric:
    out = Metric(name=name)
    body = getattr(out, data)
    body.SetInParent()
    body.data_points.extend(points)
    if data in ("sum", "histogram", "exponential_histogram"):
        body.aggregation_temporality = temporality
    if data == "sum":
        body.is_monotonic = monotonic
    return out


def request(*resources: tuple[Mapping[str, object], list[Metric]]) -> ExportMetricsServiceRequest:
    out = ExportMetricsServiceRequest()
    for attributes, metrics in resources:
        resource_metrics = out.resource_metrics.add()
        resource_metrics.resource.attributes.extend(key_values(attributes))
        resource_metrics.scope_metrics.add().metrics.extend(metrics)
    return out


def otlp_json(message: ExportMetricsServiceRequest, snake_case: bool = False, enum_names: bool = False) -> bytes:
    """The request in OTLP/JSON (int64 as strings, enums as integers or names)."""
    document = MessageToDict(message, use_integers_for_enums=not enum_names, preserving_proto_field_name=snake_case)
    return json.dumps(document).encode()


def both(message: ExportMetricsServiceRequest) -> list[MetricDecodeResult]:
    """The request decoded from protobuf, camelCase OTLP/JSON and snake_case OTLP/JSON with enum names."""
    return [
        decode_metrics_protobuf(message.SerializeToString()),
        decode_metrics_json(otlp_json(message)),
        decode_metrics_json(otlp_json(message, snake_case=True, enum_names=True)),
    ]


Row = tuple[Any, ...]


def rows(batch: MetricBatch) -> list[Row]:
    """(name, node, owner, placement, kind, time, start, value, count, bounds, bucket counts) per row."""
    s = batch.strings
    return [
        (s[name], s[node], None if owner < 0 else s[owner], placement, MetricKind(kind), *rest, bounds, counts)
        for name, node, owner, placement, kind, *rest, bounds, counts in zip(
            batch.name.tolist(),
            batch.node.tolist(),
            batch.owner.tolist(),
            batch.placement.tolist(),
            batch.kind.tolist(),
            batch.time_ns.tolist(),
            batch.start_ns.tolist(),
            batch.value.tolist(),
            batch.count.tolist(),
            batch.bucket_bounds,
            batch.bucket_counts,
            strict=True,
        )
    ]
