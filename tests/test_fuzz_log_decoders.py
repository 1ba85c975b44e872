"""Fuzzing the log decoders: whatever the bytes or the JSON, the only failure is `DecodeError` and
what comes out is bounded by what went in; deep nesting is refused, a huge body decodes and the
template miner cuts it, and a flood of distinct templates leaves the miner's state bounded.

Inputs: random bytes; valid requests (string, map and array bodies, ids, severities) mutated
byte by byte; random JSON built from the OTLP/JSON logs vocabulary so that the structure goes deep."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from ingest.otlp_logs import decode_logs_protobuf
from ingest.otlp_logs_json import decode_logs_document, decode_logs_json
from rca.graph.logtemplates import TemplateMiner
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.logs import LogBatch, LogDecodeResult
from rca.telemetry.spans import DecodeError
from tests.fuzzing import FUZZ, decode_or_refuse, mutated, varint
from tests.test_decode_logs import SPAN, T0, TRACE, otlp_json, record, request

MIN_RECORD_BYTES = 2  # the smallest encoding of an (empty) log record inside a request


@cache
def seed_messages() -> tuple[bytes, ...]:
    """Small real requests: string bodies with ids and severities, a map body, an array body."""
    plain = request(
        (
            {"service.name": "cart"},
            [record(f"added item {i}", trace_id=TRACE, span_id=SPAN, severity_number=9) for i in range(5)],
        ),
        ({"k8s.pod.name": "payment-7d9f8b6c5d-x2x4z"}, [record("card declined", severity_text="ERROR")]),
    )
    structured = request(({"service.name": "checkout"}, [record(), record()]))
    first, second = structured.resource_logs[0].scope_logs[0].log_records
    kv = first.body.kvlist_value.values.add()
    kv.key, kv.value.int_value = "status", 500
    second.body.array_value.values.add().double_value = 1.5
    return plain.SerializeToString(), structured.SerializeToString()


@cache
def seed_documents() -> tuple[bytes, ...]:
    return tuple(otlp_json(ExportLogsServiceRequest.FromString(m)) for m in seed_messages())


def _bounded(result: LogDecodeResult, size: int) -> None:
    records = len(result.batch) + result.rejected
    assert records <= max(size, 1) // MIN_RECORD_BYTES + 1, (records, size)
    assert len(result.batch.body) == len(result.batch) == result.batch.severity.shape[0]


@FUZZ
@given(st.binary(max_size=2048))
def test_random_bytes_decode_or_raise_decode_error(data: bytes) -> None:
    result = decode_or_refuse(decode_logs_protobuf, data)
    if result is not None:
        _bounded(result, len(data))


@FUZZ
@given(st.data())
def test_mutated_requests_decode_or_raise_decode_error(data: st.DataObject) -> None:
    message = data.draw(mutated(seed_messages()))
    result = decode_or_refuse(decode_logs_protobuf, message)
    if result is not None:
        _bounded(result, len(message))


@FUZZ
@given(st.data())
def test_mutated_json_decodes_or_raises_decode_error(data: st.DataObject) -> None:
    document = data.draw(mutated(seed_documents()))
    result = decode_or_refuse(decode_logs_json, document)
    if result is not None:
        _bounded(result, len(document))


_KEYS = (
    "resourceLogs", "resource_logs", "scopeLogs", "logRecords", "log_records", "resource", "attributes", "key",
    "value", "values", "body", "stringValue", "intValue", "doubleValue", "boolValue", "bytesValue", "arrayValue",
    "kvlistValue", "timeUnixNano", "observedTimeUnixNano", "traceId", "spanId", "severityNumber", "severityText",
)  # fmt: skip
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(1 << 70), 1 << 70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", "AAEC", str(T0), "SEVERITY_NUMBER_WARN"])
)
_JSON = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5),
    max_leaves=40,
)


@FUZZ
@given(_JSON)
def test_random_otlp_shaped_json_decodes_or_raises_decode_error(document: Any) -> None:
    result = decode_or_refuse(decode_logs_document, document)
    if result is not None:
        _bounded(result, len(json.dumps(document)))


@pytest.mark.parametrize("opening", ["[", '{"a":', '{"stringValue":' + "[" * 10])
def test_deep_json_is_refused_not_a_crash(opening: str) -> None:
    inner = opening * 100_000
    body = '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":' + inner + "]}]}]}]}"
    with pytest.raises(DecodeError, match="malformed OTLP/JSON"):
        decode_logs_json(body)


def test_deep_protobuf_bodies_are_refused_not_a_crash() -> None:
    value = b"\x0a\x01x"  # AnyValue{string_value: "x"}
    for _ in range(1_000):  # AnyValue{array_value: ArrayValue{values: [value]}}
        array = b"\x0a" + varint(len(value)) + value
        value = b"\x2a" + varint(len(array)) + array
    message = request(({"service.name": "cart"}, [record()])).SerializeToString()
    log_record = b"\x09" + T0.to_bytes(8, "little") + b"\x2a" + varint(len(value)) + value
    scope = b"\x12" + varint(len(log_record)) + log_record
    resource_logs = b"\x12" + varint(len(scope)) + scope
    data = b"\x0a" + varint(len(resource_logs)) + resource_logs
    assert decode_logs_protobuf(message).rejected == 0  # the framing is right: only the depth is refused
    with pytest.raises(DecodeError, match="malformed"):
        decode_logs_protobuf(data)


def test_a_huge_body_decodes_whole_and_the_miner_cuts_it() -> None:
    body = ("checkout ERROR for order 12345 after retry " * 250_000)[:10_000_000]
    message = request(({"service.name": "cart"}, [record(body), record("small")]))
    for result in (decode_logs_protobuf(message.SerializeToString()), decode_logs_json(otlp_json(message))):
        assert result.batch.body == (body, "small")
        assert result.batch.severity.tolist() == [17, 9]
        graph = ServiceGraph()
        graph.add_logs(result.batch)
        big = graph.templates.ids([body])[0]
        assert len(graph.templates.text(int(big))) <= 3 * graph.templates.max_body_chars  # "<*>" per digit token


def test_a_flood_of_distinct_templates_leaves_the_miner_bounded() -> None:
    miner = TemplateMiner(max_templates=50, cache_size=2_000)
    graph = ServiceGraph(templates=miner)
    assert graph.templates is miner  # an empty miner is falsy: not to be swapped for the default
    rng = np.random.default_rng(7)
    n, chunk = 20_000, 2_000
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    words = letters[rng.integers(0, 26, (n * 6, 4))].view("S4").ravel().astype(str).tolist()  # no digits to mask
    counts = rng.integers(1, 7, n).tolist()
    bodies = [" ".join(words[6 * i : 6 * i + k]) for i, k in enumerate(counts)]
    assert len(set(bodies)) > 0.99 * n
    held = []
    for start in range(0, n, chunk):
        part = bodies[start : start + chunk]
        graph.add_logs(
            LogBatch(
                time_ns=np.full(len(part), T0, np.int64),
                service=np.zeros(len(part), np.int32),
                trace_id=np.zeros((len(part), 2), np.uint64),
                span_id=np.zeros(len(part), np.uint64),
                severity=np.full(len(part), 9, np.int8),
                body=tuple(part),
                strings=("cart",),
            )
        )
        held.append((len(miner), miner.cached))
    assert all(templates <= miner.max_templates and cached <= miner.cache_size for templates, cached in held)
    assert held[-1][0] == miner.max_templates  # the cap was reached, and held
    assert graph.counts().log_records == n
