"""The wire scanner decodes exactly as the upb reference does, on random valid requests (with
duplicate, unknown and wrong-wire-type fields spliced in) and on malformed bytes."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from benchmarks.payload import export_requests
from ingest import otlp_scan as scan
from ingest.otlp_proto import decode_protobuf, decode_reference
from rca.telemetry.conventions import RESOURCE_KEYS, SPAN_KEYS
from rca.telemetry.spans import DecodeError, DecodeResult
from tests.fuzzing import garbled, run_bounds_checked

KEYS = [*sorted(SPAN_KEYS), "http.method", "peer.servic", "gpu.idx", "x"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def rows(result: DecodeResult) -> tuple[object, ...]:
    """Everything a batch says, with interned strings resolved (their numbering is free)."""
    b = result.batch
    text = [None, *b.strings]
    return (
        b.trace_id.tolist(),
        b.span_id.tolist(),
        b.parent_id.tolist(),
        *([text[x + 1] for x in col.tolist()] for col in (b.service, b.operation, b.peer, b.resource)),
        b.kind.tolist(),
        b.start_ns.tolist(),
        b.end_ns.tolist(),
        b.error.tolist(),
        np.nan_to_num(b.signals, nan=-math.pi).tolist(),
        sorted((r.reason, r.count) for r in result.rejections),
    )


def _tag(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _len_field(field: int, payload: bytes) -> bytes:
    return _tag(field, 2) + _varint(len(payload)) + payload


scalars = st.one_of(
    st.text(alphabet="ab0.-é 1", max_size=6).map(lambda s: ("string_value", s)),
    st.sampled_from(["high", "urgent", "low", "3", "-1", "0.5", "nan"]).map(lambda s: ("string_value", s)),
    st.booleans().map(lambda b: ("bool_value", b)),
    st.integers(-(2**63), 2**63 - 1).map(lambda i: ("int_value", i)),
    st.floats(allow_nan=True).map(lambda f: ("double_value", f)),
    st.binary(max_size=3).map(lambda b: ("bytes_value", b)),
)


@st.composite
def any_values(draw: st.DrawFn) -> AnyValue:
    value = AnyValue()
    choice = draw(st.integers(0, 9))
    if choice < 7:
        field, scalar = draw(scalars)
        setattr(value, field, scalar)
    elif choice == 7:
        for field, scalar in draw(st.lists(scalars, max_size=3)):
            setattr(value.array_value.values.add(), field, scalar)
    elif choice == 8:
        kv = value.kvlist_value.values.add()
        kv.key, kv.value.string_value = "k", draw(st.text(max_size=2))
    return value


def key_values(draw: st.DrawFn, keys: list[str], max_size: int) -> list[KeyValue]:
    return [
        KeyValue(key=draw(st.sampled_from(keys)), value=draw(any_values()))
        for _ in range(draw(st.integers(0, max_size)))
    ]


@st.composite
def spans(draw: st.DrawFn) -> bytes:
    valid = draw(st.integers(0, 4)) > 0  # most spans valid, the rest with any field broken
    start = draw(st.integers(1, 2**62))
    span = Span(
        trace_id=draw(
            st.sampled_from([bytes(range(16)), b"\7" * 16, b"", b"\0" * 16, b"\1" * 15][: 2 if valid else 5])
        ),
        span_id=draw(st.sampled_from([b"\2" * 8, b"\3" * 8, b"", b"\0" * 8, b"\4" * 7][: 2 if valid else 5])),
        parent_span_id=draw(st.sampled_from([b"", b"\2" * 8, b"\5" * 8, b"\6" * 9][: 3 if valid else 4])),
        name=draw(st.sampled_from(["GET /", "nccl:all_reduce", "", "é", "POST /x"])),
        kind=draw(st.integers(0, 5) if valid else st.integers(-2, 7)),
        start_time_unix_nano=start if valid else draw(st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 1])),
        end_time_unix_nano=start + draw(st.integers(0, 10**9)) if valid else draw(st.sampled_from([0, 2, 2**63])),
    )
    span.attributes.extend(key_values(draw, KEYS, 5))
    if draw(st.booleans()):
        span.status.code = draw(st.integers(0, 2))  # type: ignore[assignment]
        span.status.message = "m"
    if draw(st.booleans()):
        span.events.add(name="e", time_unix_nano=3).attributes.add(key="gpu.id", value=AnyValue(int_value=1))
    extra = draw(
        st.lists(
            st.sampled_from(
                [
                    _len_field(5, b"again"),  # a repeated singular field: the last one wins
                    _tag(6, 0) + _varint(2**35 + 3),  # an enum past 32 bits keeps its low bits
                    _tag(6, 0) + _varint(-1),
                    _tag(7, 0) + _varint(5),  # a known field with the wrong wire type is unknown
                    _tag(1, 0) + _varint(1),
                    _tag(4, 5) + b"\0\0\0\0",
                    _len_field(15, _tag(3, 0) + _varint(2)),  # a second status merges into the first
                    _len_field(15, _tag(3, 0) + _varint(0)),
                    _len_field(15, _tag(3, 0) + _varint(1) + _tag(3, 0) + _varint(2**32 + 2)),
                    _len_field(15, _tag(2, 2) + b"\0"),
                    _tag(8, 1) + struct.pack("<Q", 7),
                    _tag(99, 5) + b"abcd",  # unknown fields of every wire type
                    _tag(98, 3) + _tag(1, 0) + b"\1" + _tag(98, 4),
                    _len_field(
                        9, KeyValue(key="peer.service", value=AnyValue(string_value="late")).SerializeToString()
                    ),
                    _len_field(9, _len_field(1, b"db.system") + _len_field(2, _tag(1, 2) + b"\2pg")),
                    _len_field(9, _len_field(1, b"gpu.id") + _len_field(1, b"x")),  # a key given twice
                    _len_field(2, b"\x09" * 8),
                ]
            ),
            max_size=4,
        )
    )
    return span.SerializeToString() + b"".join(extra)


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    out = b""
    for _ in range(draw(st.integers(0, 3))):
        resource = b"".join(
            _len_field(1, kv.SerializeToString())
            for kv in key_values(draw, [*sorted(RESOURCE_KEYS), "k8s.pod.name"], 4)
        )
        scopes = b""
        for _ in range(draw(st.integers(0, 3))):
            body = b"".join(_len_field(2, s) for s in draw(st.lists(spans(), max_size=4)))
            scopes += _len_field(2, _len_field(1, _len_field(1, b"scope")) + body)
        parts = [_len_field(1, resource), scopes, _len_field(3, b"schema")]
        out += _len_field(1, b"".join(draw(st.permutations(parts))))
    return out


@SETTINGS
@given(requests())
def test_scanner_matches_reference_on_random_requests(data: bytes) -> None:
    assert rows(decode_protobuf(data)) == rows(decode_reference(data))


@SETTINGS
@given(requests(), st.data())
def test_malformed_bytes_raise_decode_error_or_decode_alike(data: bytes, draw: st.DataObject) -> None:
    for body in garbled(draw, data):
        try:
            expected = rows(decode_reference(body))
        except DecodeError as exc:
            try:
                decode_protobuf(body)
            except DecodeError as fast:
                assert str(fast) == str(exc)
            else:
                raise AssertionError("the fast path accepted bytes the reference refuses") from None
        else:
            assert rows(decode_protobuf(body)) == expected


@SETTINGS
@given(st.binary(max_size=300), st.integers(0, 50))
def test_scan_kernel_answers_bad_or_at_most_its_spans_on_any_bytes(data: bytes, n_spans: int) -> None:
    """What the kernel returns; whether it stays inside its arrays is checked with bounds checking on
    (`test_scan_kernel_stays_inside_the_buffer_under_bounds_checking`)."""
    keys = np.frombuffer(b"peer.service", np.uint8)
    u = np.zeros((n_spans, scan.N_U), np.uint64)
    i = np.zeros((n_spans, scan.N_I), np.int64)
    t = np.zeros((n_spans, scan.N_T), np.int64)
    names, groups = scan.scan(np.frombuffer(data, np.uint8), n_spans, keys, np.asarray([12], np.int64), u, i, t)
    assert (names, groups) == (scan.BAD, scan.BAD) or (0 <= names <= n_spans and 0 <= groups <= n_spans)


BOUNDSCHECKED_SCAN = """
from google.protobuf.message import DecodeError as NotARequest
from hypothesis import given, settings, strategies as st
from benchmarks.payload import export_requests
from ingest import otlp_scan as scan
from ingest.otlp_proto import decode_protobuf
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from rca.telemetry.conventions import SPAN_KEYS
from rca.telemetry.spans import DecodeError
from tests.test_ingest_scanner import SETTINGS, requests

names = sorted(key.encode() for key in SPAN_KEYS)
keys, key_ends = np.frombuffer(b"".join(names), np.uint8), np.cumsum([len(k) for k in names], dtype=np.int64)
scans = decodes = 0
EVERY_RUN_ALIKE = settings(SETTINGS, derandomize=True, database=None)

def scan_as(body, n):
    global scans
    out = [np.zeros((n, w), d) for w, d in ((scan.N_U, np.uint64), (scan.N_I, np.int64), (scan.N_T, np.int64))]
    scan.scan(np.frombuffer(body, np.uint8), n, keys, key_ends, *out)
    scans += 1

def spans_in(body):
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except NotARequest:
        return 0
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)

def cut_and_garbled(request):
    global decodes
    count = spans_in(request)
    bodies = [request[:cut] for cut in range(len(request) + 1)]
    bodies += [request[:at] + bytes([(0, 0x80, 0xFF)[at % 3]]) + request[at + 1 :] for at in range(len(request))]
    for body in bodies:
        for n in {0, count // 2, count, count + 2, spans_in(body)}:
            scan_as(body, n)
        try:
            decode_protobuf(body)
        except DecodeError:
            pass
        decodes += 1

@EVERY_RUN_ALIKE
@given(st.binary(max_size=300), st.integers(0, 50))
def random_bytes(data, n):
    scan_as(data, n)

@EVERY_RUN_ALIKE
@given(requests())
def random_requests(data):
    cut_and_garbled(data)

random_bytes()
random_requests()
cut_and_garbled(export_requests(1, 8, 10**18)[0])
print(scans, decodes)
"""


def test_scan_kernel_stays_inside_the_buffer_under_bounds_checking(tmp_path: Path) -> None:
    """The kernels run with numba's bounds checking (a fresh cache, so nothing compiled without it is
    reused) on the property tests' random bytes, and on their requests and a benchmark request each cut
    at every length and with each byte in turn set to 0x00, 0x80 or 0xFF, for 0, half, all and more
    than all their spans: an index past an array's end raises IndexError there and fails the script."""
    scans, decodes = map(int, run_bounds_checked(BOUNDSCHECKED_SCAN, tmp_path).split())
    assert scans > decodes > 1000  # every input was scanned (several span counts each) and decoded


def test_benchmark_payload_decodes_alike_and_groups_attributes() -> None:
    payload = export_requests(2, 256, 10**18)
    for data in payload:
        fast = decode_protobuf(data)
        assert len(fast.batch) == 256
        assert rows(fast) == rows(decode_reference(data))
        assert (fast.batch.peer >= 0).sum() == 128  # client spans name their callee


def test_a_request_without_spans_decodes_to_an_empty_batch() -> None:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add()
    assert len(decode_protobuf(request.SerializeToString()).batch) == 0
