"""Fuzzing the metric decoders: whatever the bytes or the JSON, the only failure is `DecodeError`
and what comes out is bounded by what went in; deep attribute values are refused, a point with a
huge number of attributes decodes to one placed row, and exponential buckets always convert into
consistent explicit bounds.

Inputs: random bytes; valid requests (every data kind, DCGM-like labels) mutated byte by byte;
random JSON built from the OTLP/JSON metrics vocabulary so that the structure goes deep."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from ingest.otlp_metrics import decode_metrics_protobuf
from ingest.otlp_metrics_json import decode_metrics_document, decode_metrics_json
from ingest.otlp_metrics_rules import MAX_SCALE, MIN_SCALE, exponential_buckets
from rca.telemetry.metrics import MetricDecodeResult
from rca.telemetry.spans import DecodeError
from tests.fuzzing import FUZZ, decode_or_refuse, mutated, varint
from tests.metricrequests import (
    CUMULATIVE,
    DELTA,
    T0,
    both,
    exponential_point,
    histogram_point,
    metric,
    number,
    otlp_json,
    request,
    summary_point,
)

MIN_POINT_BYTES = 2  # the smallest encoding of an (empty) data point, or of `{}` in JSON


@cache
def seed_messages() -> tuple[bytes, ...]:
    """Small real requests: every data kind, and DCGM-like gauges with non-string attributes."""
    kinds = request(
        (
            {"service.name": "checkout"},
            [
                metric("up", "gauge", number(1.0, {"route": "/cart"}), number(3)),
                metric("requests", "sum", number(120), temporality=CUMULATIVE, monotonic=True),
                metric("latency", "histogram", histogram_point(1.25, 5, [0.1, 1.0], [1, 3, 1]), temporality=DELTA),
                metric("exp", "exponential_histogram", exponential_point(9.0, 3, 1, 1, -2, [1, 1]), temporality=DELTA),
                metric("gc", "summary", summary_point(0.5, 10, {0.5: 0.01, 0.95: 0.04})),
            ],
        )
    )
    labels = {"gpu": 0, "UUID": "GPU-5b8e", "Hostname": "n1", "exported_pod": "vllm-7d9f8b6c5d-x2x4z", "x": [1.5]}
    dcgm = request(
        ({"service.name": "dcgm-exporter"}, [metric("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", number(0.5, labels))])
    )
    return kinds.SerializeToString(), dcgm.SerializeToString()


@cache
def seed_documents() -> tuple[bytes, ...]:
    return tuple(otlp_json(ExportMetricsServiceRequest.FromString(m)) for m in seed_messages())


def _bounded(result: MetricDecodeResult, size: int) -> None:
    points = len(result.batch) + result.rejected
    assert points <= max(size, 1) // MIN_POINT_BYTES + 1, (points, size)
    batch = result.batch
    assert len(batch.bucket_bounds) == len(batch.bucket_counts) == len(batch) == batch.value.shape[0]
    assert batch.time_ns.min(initial=1) > 0  # validated: no point without a time


@FUZZ
@given(st.binary(max_size=2048))
def test_random_bytes_decode_or_raise_decode_error(data: bytes) -> None:
    result = decode_or_refuse(decode_metrics_protobuf, data)
    if result is not None:
        _bounded(result, len(data))


@FUZZ
@given(st.data())
def test_mutated_requests_decode_or_raise_decode_error(data: st.DataObject) -> None:
    message = data.draw(mutated(seed_messages()))
    result = decode_or_refuse(decode_metrics_protobuf, message)
    if result is not None:
        _bounded(result, len(message))


@FUZZ
@given(st.data())
def test_mutated_json_decodes_or_raises_decode_error(data: st.DataObject) -> None:
    document = data.draw(mutated(seed_documents()))
    result = decode_or_refuse(decode_metrics_json, document)
    if result is not None:
        _bounded(result, len(document))


_KEYS = (
    "resourceMetrics", "resource_metrics", "scopeMetrics", "metrics", "resource", "attributes", "key", "value",
    "values", "name", "gauge", "sum", "histogram", "exponentialHistogram", "summary", "dataPoints", "data_points",
    "aggregationTemporality", "isMonotonic", "timeUnixNano", "startTimeUnixNano", "asDouble", "asInt", "flags",
    "count", "bucketCounts", "explicitBounds", "scale", "zeroCount", "positive", "negative", "offset",
    "quantileValues", "quantile", "stringValue", "intValue", "doubleValue", "boolValue", "bytesValue", "arrayValue",
    "kvlistValue",
)  # fmt: skip
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(1 << 70), 1 << 70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from([str(T0), "AGGREGATION_TEMPORALITY_DELTA", "NaN", "-Infinity", "AAEC", "gpu", "Hostname"])
)
_JSON = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5),
    max_leaves=40,
)


@FUZZ
@given(_JSON)
def test_random_otlp_shaped_json_decodes_or_raises_decode_error(document: Any) -> None:
    result = decode_or_refuse(decode_metrics_document, document)
    if result is not None:
        _bounded(result, len(json.dumps(document)))


@FUZZ
@given(
    st.integers(MIN_SCALE, MAX_SCALE),
    st.integers(0, 1 << 40),
    st.integers(-(1 << 31), (1 << 31) - 1),
    st.lists(st.integers(0, 1 << 40), max_size=40),
    st.integers(0, 1 << 40),
)
def test_exponential_buckets_always_convert_consistently(
    scale: int, zero: int, offset: int, positive: list[int], negative: int
) -> None:
    bounds, counts = exponential_buckets(scale, zero, offset, positive, negative)
    assert len(counts) == len(bounds) + 1
    assert np.all(np.isfinite(bounds)) and np.all(np.diff(bounds) >= 0) and bounds[0] == 0.0
    assert sum(counts) == pytest.approx(zero + negative + sum(positive))


@pytest.mark.parametrize("opening", ["[", '{"a":', '{"stringValue":' + "[" * 10])
def test_deep_json_is_refused_not_a_crash(opening: str) -> None:
    inner = opening * 100_000
    body = '{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"attributes":' + inner
    with pytest.raises(DecodeError, match="malformed OTLP/JSON"):
        decode_metrics_json(body + "]}]}}]}]}]}")


def _field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def test_deep_protobuf_attribute_values_are_refused_not_a_crash() -> None:
    value = _field(1, b"x")  # AnyValue{string_value: "x"}
    for _ in range(1_000):  # AnyValue{array_value: ArrayValue{values: [value]}}
        value = _field(5, _field(1, value))
    key_value = _field(1, b"gpu") + _field(2, value)
    point = b"\x19" + T0.to_bytes(8, "little") + b"\x21" + bytes(8) + _field(7, key_value)
    data = _field(1, _field(2, _field(2, _field(1, b"up") + _field(5, _field(1, point)))))
    shallow = _field(1, _field(2, _field(2, _field(1, b"up") + _field(5, _field(1, point[:18])))))
    assert len(decode_metrics_protobuf(shallow).batch) == 1  # the framing is right: only the depth is refused
    with pytest.raises(DecodeError, match="malformed"):
        decode_metrics_protobuf(data)


def test_a_point_with_a_huge_number_of_attributes_decodes_to_one_placed_row() -> None:
    labels: dict[str, object] = {f"label_{k}": f"value {k}" for k in range(100_000)}
    labels |= {"gpu": 3, "Hostname": "n1", "exported_pod": "vllm-engine-7d9f8b6c5d-x2x4z"}
    message = request(
        ({"service.name": "dcgm-exporter"}, [metric("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", number(0.5, labels))])
    )
    for result in both(message):
        batch = result.batch
        assert result.rejections == () and len(batch) == 1
        assert (batch.strings[batch.node[0]], batch.strings[batch.owner[0]]) == ("gpu:n1/3", "vllm-engine")
