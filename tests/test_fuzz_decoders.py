"""Fuzzing the decoders: whatever the bytes or the JSON, the only failure is `DecodeError`, what
comes out is bounded by what went in, and decoding allocates memory in proportion to the input.

Inputs: random bytes; valid OTLP requests of simulated LLM-serving and microservice traffic,
mutated (bytes flipped, inserted, deleted, truncated, spliced); random JSON, and random JSON built
from the OTLP/JSON and Jaeger vocabularies so that the structure goes deep."""

from __future__ import annotations

import json
import tracemalloc
from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.jaeger_json import decode_jaeger_document, decode_jaeger_json
from ingest.otlp_encode import encode_batch
from ingest.otlp_json import decode_document, decode_otlp_json
from ingest.otlp_proto import decode_protobuf, decode_reference
from rca.telemetry.spans import DecodeResult
from simulation import simulate
from simulation.case_files import otlp_json
from tests.fuzzing import FUZZ, decode_or_refuse, mutated

MIN_SPAN_BYTES = 2  # the smallest encoding of an (empty) span inside a request


@cache
def seed_messages() -> tuple[bytes, ...]:
    """Small real requests: LLM serving (GPU, KV, NCCL, NUMA attributes) and a microservice shop."""
    found: list[bytes] = []
    for scenario in ("llm-nccl_communication", "boutique-errors"):
        case = simulate(scenario, seed=3, rate=1)
        found += encode_batch(case.batches[len(case.batches) // 2], max_spans=40)[:2]
    return tuple(found)


def _bounded(result: DecodeResult, size: int) -> None:
    spans = len(result.batch) + result.rejected
    assert spans <= max(size, 1) // MIN_SPAN_BYTES + 1, (spans, size)


@FUZZ
@given(st.binary(max_size=2048))
def test_random_bytes_decode_or_raise_decode_error(data: bytes) -> None:
    result = decode_or_refuse(decode_protobuf, data)
    if result is not None:
        _bounded(result, len(data))


@FUZZ
@given(mutated(seed_messages()))
def test_mutated_requests_decode_like_the_reference_or_raise_decode_error(data: bytes) -> None:
    result = decode_or_refuse(decode_protobuf, data)
    reference = decode_or_refuse(decode_reference, data)
    assert (result is None) == (reference is None)
    if result is not None and reference is not None:
        _bounded(result, len(data))
        assert (len(result.batch), result.rejected) == (len(reference.batch), reference.rejected)


JSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=12)
OTLP_KEYS = [
    "resourceSpans",
    "scopeSpans",
    "spans",
    "resource",
    "attributes",
    "key",
    "value",
    "stringValue",
    "intValue",
    "doubleValue",
    "boolValue",
    "arrayValue",
    "values",
    "bytesValue",
    "kvlistValue",
    "traceId",
    "spanId",
    "parentSpanId",
    "name",
    "kind",
    "startTimeUnixNano",
    "endTimeUnixNano",
    "status",
    "code",
    "resource_spans",
    "scope_spans",
    "span_id",
    "trace_id",
    "service.name",
    "gpu.id",
]
JAEGER_KEYS = [
    "data",
    "traceID",
    "spanID",
    "spans",
    "processes",
    "processID",
    "process",
    "serviceName",
    "tags",
    "key",
    "type",
    "value",
    "references",
    "refType",
    "operationName",
    "startTime",
    "duration",
    "string",
    "int64",
    "float64",
    "bool",
    "binary",
    "span.kind",
    "error",
    "CHILD_OF",
    "p1",
]


def shaped_json(keys: list[str]) -> st.SearchStrategy[Any]:
    """Random JSON whose object keys mostly come from `keys`, with the ids and numbers those
    formats expect among the scalars, so decoding goes past the first check."""
    hexes = st.sampled_from(["", "0", "00f067aa0ba902b7", "5b8efff798038103d269b633813fc60c", "zz", "0" * 40])
    numbers = st.sampled_from(["1767000000000000000", "-1", "1e3", "9" * 30, 1_767_000_000_000_000, 2**64])
    scalars = JSON_SCALARS | hexes | numbers | st.sampled_from(keys)
    names = st.sampled_from(keys) | st.text(max_size=6)
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(names, inner, max_size=6),
        max_leaves=60,
    )


def _seed_json() -> dict[str, Any]:
    return otlp_json(ExportTraceServiceRequest.FromString(seed_messages()[0]))


@FUZZ
@given(shaped_json(OTLP_KEYS) | st.builds(lambda: _seed_json()))
def test_otlp_json_documents_decode_or_raise_decode_error(document: Any) -> None:
    text = json.dumps(document)
    for data in (text, text.encode()):
        result = decode_or_refuse(decode_otlp_json, data)
        if result is not None:
            _bounded(result, len(text))
    decode_or_refuse(decode_document, document)


@FUZZ
@given(shaped_json(JAEGER_KEYS))
def test_jaeger_json_documents_decode_or_raise_decode_error(document: Any) -> None:
    text = json.dumps(document)
    result = decode_or_refuse(decode_jaeger_json, text)
    if result is not None:
        _bounded(result, len(text))
    decode_or_refuse(decode_jaeger_document, document)


@FUZZ
@given(st.binary(max_size=512) | st.text(max_size=512).map(str.encode))
def test_json_decoders_refuse_non_json_bytes(data: bytes) -> None:
    for decode in (decode_otlp_json, decode_jaeger_json):
        result = decode_or_refuse(decode, data)
        if result is not None:
            _bounded(result, len(data))


@pytest.mark.parametrize("depth", [250, 330, 5000])
def test_deeply_nested_json_is_decoded_or_refused_not_a_crash(depth: int) -> None:
    """Attribute values nested around the parser's and the decoders' recursion limits."""
    value = '{"arrayValue": {"values": [' * depth + '{"stringValue": "x"}' + "]}}" * depth
    attributes = f'[{{"key": "gpu.id", "value": {value}}}, {{"key": "service.name", "value": {value}}}]'
    span = f'{{"traceId": "{"ab" * 16}", "spanId": "{"cd" * 8}", "name": "op", "attributes": {attributes}}}'
    otlp = (
        f'{{"resourceSpans": [{{"resource": {{"attributes": {attributes}}}, "scopeSpans": [{{"spans": [{span}]}}]}}]}}'
    )
    tags = f'[{{"key": "gpu.id", "type": "string", "value": {value}}}]'
    jaeger = f'{{"data": [{{"traceID": "ab", "spans": [{{"spanID": "cd", "tags": {tags}}}], "processes": {{}}}}]}}'
    decode_or_refuse(decode_otlp_json, otlp)
    decode_or_refuse(decode_jaeger_json, jaeger)
    nested = "[" * depth * 20 + "]" * depth * 20
    assert decode_or_refuse(decode_otlp_json, nested) is None
    assert decode_or_refuse(decode_jaeger_json, nested) is None


def test_decoding_memory_grows_with_the_input_not_beyond() -> None:
    """Peak Python allocation while decoding each mutated or random input stays within a
    fixed multiple of its size (plus a constant for the decoder's tables)."""
    inputs = [*seed_messages(), bytes(range(256)) * 8]
    for message in seed_messages():
        inputs += [message[: len(message) // 2], message + message[:100], b"\x0a\xff\xff\xff\xff\x0f" + message]
    decode_protobuf(inputs[0])  # compiled and warm before measuring
    tracemalloc.start()
    try:
        for data in inputs:
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            decode_or_refuse(decode_protobuf, data)
            peak = tracemalloc.get_traced_memory()[1] - before
            assert peak <= 64 * len(data) + (4 << 20), (len(data), peak)
    finally:
        tracemalloc.stop()
