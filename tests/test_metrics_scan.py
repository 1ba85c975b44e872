"""The metric wire scanner (`ingest.otlp_metrics_scan`) decodes exactly as upb's objects do: the
benchmark payload, hand-made requests, and random requests with duplicated, unknown and
wrong-wire-type fields spliced in at every level; refusals alike; the kernel safe on any bytes."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.metric_payload import POINTS_PER_REQUEST, metric_export_requests
from ingest import otlp_metrics_scan as scan
from ingest.otlp_metrics import decode_metrics_protobuf, decode_metrics_reference
from ingest.otlp_metrics_rules import NO_VALUE
from rca.telemetry.metrics import MetricDecodeResult
from rca.telemetry.spans import DecodeError
from tests.fuzzing import FUZZ, garbled, run_bounds_checked, varint
from tests.metricrequests import CUMULATIVE, DELTA, T0, histogram_point, key_values, metric, number, request

I64, LEN = 1, 2


def everything(result: MetricDecodeResult) -> tuple[object, ...]:
    """Every column of the batch (NaN made comparable), its strings and the rejections in order."""
    b = result.batch
    columns = (b.time_ns, b.start_ns, b.series, b.name, b.node, b.owner, b.placement, b.kind, b.count)
    return (
        *(c.tolist() for c in columns),
        np.nan_to_num(b.value, nan=-math.pi).tolist(),
        b.bucket_bounds,
        b.bucket_counts,
        b.strings,
        result.rejections,
    )


def outcome(decode: Callable[[bytes], MetricDecodeResult], data: bytes) -> object:
    try:
        return everything(decode(data))
    except DecodeError as exc:
        return ("refused", str(exc))


def scanned(data: bytes) -> bool:
    """Whether the scanner reads the request (rather than answering BAD)."""
    return bool(scan.scan(np.frombuffer(data, np.uint8))[0] >= 0)


def assert_alike(data: bytes) -> None:
    assert outcome(decode_metrics_protobuf, data) == outcome(decode_metrics_reference, data)


def _tag(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def len_field(field: int, payload: bytes) -> bytes:
    return _tag(field, LEN) + varint(len(payload)) + payload


def _fixed(field: int, value: int) -> bytes:
    return _tag(field, I64) + struct.pack("<Q", value & (1 << 64) - 1)


def _double(field: int, value: float) -> bytes:
    return _tag(field, I64) + struct.pack("<d", value)


def test_the_benchmark_payload_is_scanned_and_decodes_alike() -> None:
    payload = metric_export_requests(8, POINTS_PER_REQUEST, 1_700_000_000_000_000_000)
    for data in payload:
        assert scanned(data)
        fast = decode_metrics_protobuf(data)
        assert len(fast.batch) > 400
        assert everything(fast) == everything(decode_metrics_reference(data))


def test_hand_made_requests_are_scanned_and_decode_alike() -> None:
    stale = 1
    message = request(
        (
            {"service.name": "checkout"},
            [
                metric("up", "gauge", number(1.0, {"gpu": 1}), number(7, {"gpu": 1}), number(2**63 - 1)),
                metric("low", "gauge", number(-(2**63)), number(2**53 + 1), number(-0.0), number(float("inf"))),
                metric("gone", "gauge", number(1.0, flags=stale), number(None), number(3, flags=stale | 2)),
                metric("requests", "sum", number(120, {"route": "/cart"}), temporality=CUMULATIVE, monotonic=True),
                metric("inflight", "sum", number(4.5), temporality=DELTA),
                metric("unspecified", "sum", number(1.0)),
                metric("latency", "histogram", histogram_point(1.25, 5, [0.1, 1.0], [1, 3, 1]), temporality=DELTA),
                metric("", "gauge", number(1.0)),
                metric("nodata", "gauge"),
                metric("kinds", "gauge", number(1.0, {"i": 3, "b": True, "d": 2.5, "a": ["x", 1], "m": {"k": "v"}})),
            ],
        ),
        ({"service.name": "cart"}, [metric("up", "gauge", number(1.0, {"gpu": 1}), number(2.0, {}))]),
    )
    data = message.SerializeToString() + len_field(1, b"")  # an empty ResourceMetrics
    data += len_field(1, len_field(2, len_field(2, len_field(1, b"only a name"))))
    assert scanned(data)
    assert_alike(data)
    result = decode_metrics_protobuf(data)
    reasons = dict((r.reason, r.count) for r in result.rejections)
    assert reasons[NO_VALUE] == 1 and not any("staleness" in reason for reason in reasons)  # markers: accepted


def _point(*fields: bytes) -> bytes:
    return b"".join(fields)


def gauge_request(*points: bytes, name: bytes = b"up") -> bytes:
    gauge = b"".join(len_field(1, p) for p in points)
    return len_field(1, len_field(2, len_field(2, len_field(1, name) + len_field(5, gauge))))


KV = key_values({"gpu": "0", "Hostname": "n1"})
ATTRIBUTES = b"".join(len_field(7, kv.SerializeToString()) for kv in KV)


@pytest.mark.parametrize(
    ("point", "fast"),
    [
        (_point(_fixed(3, T0), _double(4, 1.5), _double(4, 2.5), ATTRIBUTES), True),  # the last value wins
        (_point(_fixed(3, T0), _double(4, 1.5), _fixed(6, -7), ATTRIBUTES), True),  # as_int after as_double
        (_point(_fixed(3, T0), _fixed(6, 7), _double(4, 0.25), ATTRIBUTES), True),
        (_point(_fixed(3, 5), _fixed(3, T0), _fixed(2, 1), _fixed(2, 9), _double(4, 1.0)), True),
        (_point(_tag(8, 0) + varint(1), _tag(8, 0) + varint(0), _fixed(3, T0), _double(4, 1.0)), True),  # not stale
        (_point(_tag(8, 0) + varint(2**32 + 1), _fixed(3, T0), _double(4, 1.0)), True),  # flags keep their low bits
        (_point(_tag(4, 0) + varint(5), _fixed(3, T0)), True),  # as_double of the wrong wire type: no value
        (_point(_tag(3, 0) + varint(5), _double(4, 1.0), _tag(7, 0) + varint(1)), True),  # wrong wire types
        (_point(_tag(99, 5) + b"abcd", _tag(98, 3) + _tag(1, 0) + b"\1" + _tag(98, 4), _double(4, 1.0)), True),
        (_point(len_field(5, b"\x11" + bytes(8)), _fixed(3, T0), _double(4, 1.0), ATTRIBUTES), True),  # an exemplar
        (_point(ATTRIBUTES, _fixed(3, T0), _double(4, 1.0), ATTRIBUTES), False),  # attributes apart: upb reads it
        (_point(_fixed(3, T0), _double(4, 1.0), len_field(7, b"")), True),  # an empty KeyValue
        (
            _point(_fixed(3, T0), _double(4, 1.0), len_field(7, len_field(1, b"k")), len_field(7, len_field(1, b"k"))),
            True,
        ),
    ],
)
def test_points_read_with_protobuf_semantics(point: bytes, fast: bool) -> None:
    data = gauge_request(point, point, _point(_fixed(3, T0), _double(4, 3.0), ATTRIBUTES))
    assert scanned(data) is fast
    assert_alike(data)


def test_a_metric_with_its_data_given_twice_is_read_by_upb() -> None:
    gauge = len_field(1, _point(_fixed(3, T0), _double(4, 1.0)))
    for second in (5, 7, 9):
        data = len_field(
            1, len_field(2, len_field(2, len_field(1, b"up") + len_field(5, gauge) + len_field(second, gauge)))
        )
        assert not scanned(data)
        assert_alike(data)
        assert len(decode_metrics_protobuf(data).batch) == (2 if second == 5 else 0)  # a gauge given twice merges


@pytest.mark.parametrize(
    "attribute",
    [
        b"\x0a\x05ab",  # a key longer than the KeyValue
        len_field(1, b"\xff\xfe"),  # a key that is not UTF-8
        len_field(2, len_field(1, b"\xc3")),  # a string value that is not UTF-8
    ],
)
def test_a_malformed_key_value_is_refused_where_it_is_read(attribute: bytes) -> None:
    bad = _point(_fixed(3, T0), _double(4, 1.0), ATTRIBUTES, len_field(7, attribute))
    stale = _point(_fixed(3, T0), _double(4, 1.0), len_field(7, attribute), _tag(8, 0) + varint(1))
    no_value = _point(_fixed(3, T0), len_field(7, attribute))
    refused = gauge_request(_point(_fixed(3, T0), _double(4, 1.0)), bad)
    assert scanned(refused)
    with pytest.raises(DecodeError, match="malformed ExportMetricsServiceRequest") as fast:
        decode_metrics_protobuf(refused)
    with pytest.raises(DecodeError) as reference:
        decode_metrics_reference(refused)
    assert str(fast.value) == str(reference.value)
    # points and metrics that are not read do not refuse the request
    for data in (gauge_request(stale, no_value), gauge_request(bad, name=b"")):
        assert scanned(data)
        assert_alike(data)
        assert len(decode_metrics_protobuf(data).batch) == 0


# Random requests: fields of every level, in any order, with extra ones spliced in.
times = st.sampled_from([0, 1, T0, T0 + 15, 2**63 - 1, 2**63, 2**64 - 1])
values = st.one_of(
    st.floats().map(lambda v: _double(4, v)),
    st.integers(-(2**63), 2**63 - 1).map(lambda v: _fixed(6, v)),
    st.sampled_from([b"", _tag(4, 0) + varint(3), _tag(6, 5) + b"\0\0\0\0"]),
)
labels = st.dictionaries(
    st.sampled_from(["gpu", "Hostname", "pod", "service.name", "k"]),
    st.one_of(
        st.sampled_from(["0", "n1", "", "vllm-7d9f8b6c5d-x2x4z"]),
        st.integers(-(2**63), 2**63 - 1),
        st.booleans(),
        st.floats(),
    ),
    max_size=4,
)
extras = st.sampled_from(
    [
        _tag(99, 5) + b"abcd",
        _tag(98, 3) + _tag(1, 0) + b"\1" + _tag(98, 4),
        _tag(97, 0) + varint(2**64 - 1),
        len_field(96, b"xyz"),
        _tag(1, 0) + varint(1),  # wrong wire types for fields the readers know
        _tag(2, 5) + b"\0\0\0\0",
        _tag(5, 0) + varint(1),
        _tag(7, 1) + bytes(8),
    ]
)


@st.composite
def points(draw: st.DrawFn) -> bytes:
    fields = [_fixed(3, draw(times)), _fixed(2, draw(times)), *draw(st.lists(values, max_size=2))]
    fields += draw(st.lists(st.sampled_from([_tag(8, 0) + varint(1), _tag(8, 0) + varint(2)]), max_size=1))
    fields += draw(st.lists(extras, max_size=2))
    attributes = b"".join(len_field(7, kv.SerializeToString()) for kv in key_values(draw(labels)))
    fields = draw(st.permutations(fields))
    at = draw(st.integers(0, len(fields)))
    return b"".join([*fields[:at], attributes, *fields[at:]])


@st.composite
def metrics(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["gauge", "sum", "histogram", "none"]))
    name = len_field(1, draw(st.sampled_from([b"up", b"", b"requests"])))
    if kind == "histogram":
        body = metric("h", "histogram", histogram_point(1.0, 1, [1.0], [0, 1]), temporality=DELTA).histogram
        return name + len_field(9, body.SerializeToString())
    if kind == "none":
        return name + draw(st.sampled_from([b"", len_field(2, b"description")]))
    body = b"".join(len_field(1, p) for p in draw(st.lists(points(), max_size=4)))
    if kind == "sum":
        body += _tag(2, 0) + varint(draw(st.sampled_from([0, 1, 2, 2**32 + 2]))) + _tag(3, 0) + varint(1)
    body += b"".join(draw(st.lists(extras, max_size=1)))
    fields = [name, len_field(5 if kind == "gauge" else 7, body), *draw(st.lists(extras, max_size=1))]
    return b"".join(draw(st.permutations(fields)))


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    out = b""
    for _ in range(draw(st.integers(0, 3))):
        resource = b"".join(len_field(1, kv.SerializeToString()) for kv in key_values(draw(labels)))
        scopes = b""
        for _ in range(draw(st.integers(0, 2))):
            body = b"".join(len_field(2, m) for m in draw(st.lists(metrics(), max_size=3)))
            scopes += len_field(
                2, len_field(1, len_field(1, b"scope")) + body + b"".join(draw(st.lists(extras, max_size=1)))
            )
        out += len_field(1, b"".join(draw(st.permutations([len_field(1, resource), scopes, len_field(3, b"schema")]))))
    return out


@FUZZ
@given(requests())
def test_random_requests_are_scanned_and_decode_alike(data: bytes) -> None:
    assert scanned(data)  # the points' attributes stay together, no data oneof is given twice
    assert_alike(data)


@FUZZ
@given(requests(), st.data())
def test_mutated_requests_decode_alike_or_are_refused_alike(data: bytes, draw: st.DataObject) -> None:
    for body in garbled(draw, data):
        assert_alike(body)


@FUZZ
@given(st.binary(max_size=300))
def test_the_kernel_answers_bad_or_consistent_columns_on_any_bytes(data: bytes) -> None:
    n, m, _, _, groups, reps, n_groups = scan.scan(np.frombuffer(data, np.uint8))
    if n != scan.BAD:
        assert 0 <= n <= len(data) // 2 and m[:, scan.M_END].max(initial=0) <= n
        assert groups.shape[0] == n and 0 <= n_groups <= n and (groups < n_groups).all()
        assert (groups[reps[:n_groups]] == np.arange(n_groups)).all()


BOUNDSCHECKED_SCAN = """
from hypothesis import given, settings, strategies as st
from benchmarks.metric_payload import metric_export_requests
from ingest import otlp_metrics_scan as scan
from tests.test_metrics_scan import gauge_request, len_field, metrics, points, requests

scans = 0
EVERY_RUN_ALIKE = settings(max_examples=100, deadline=None, derandomize=True, database=None)

def scan_all(request):
    global scans
    for cut in range(len(request) + 1):
        scan.scan(np.frombuffer(request[:cut], np.uint8))
    for at in range(len(request)):
        body = request[:at] + bytes([(0, 0x80, 0xFF)[at % 3]]) + request[at + 1 :]
        scan.scan(np.frombuffer(body, np.uint8))
    scans += 2 * len(request) + 1

@EVERY_RUN_ALIKE
@given(st.binary(max_size=300))
def random_bytes(data):
    global scans
    scan.scan(np.frombuffer(data, np.uint8))
    scans += 1

@EVERY_RUN_ALIKE
@given(requests())
def random_requests(data):
    scan_all(data)

@EVERY_RUN_ALIKE
@given(points(), metrics())
def cut_inside_their_framing(point, metric):
    # the cut message is the last of each enclosing one: its end is the buffer's
    global scans
    for cut in range(len(point) + 1):
        scan.scan(np.frombuffer(gauge_request(point[:cut]), np.uint8))
    for cut in range(len(metric) + 1):
        scan.scan(np.frombuffer(len_field(1, len_field(2, len_field(2, metric[:cut]))), np.uint8))
    scans += len(point) + len(metric) + 2

random_bytes()
random_requests()
cut_inside_their_framing()
scan_all(metric_export_requests(1, 0, 10**18)[0][:3000])
print(scans)
"""


def test_the_kernel_stays_inside_its_arrays_under_bounds_checking(tmp_path: Path) -> None:
    """The kernel runs with numba's bounds checking (a fresh cache, so nothing compiled without it
    is reused) on random bytes; on random requests and the start of a benchmark request cut at
    every length and with each byte in turn set to 0x00, 0x80 or 0xFF; and on random points and
    metrics cut at every length inside a request framed around them, so that they end where the
    buffer does. An index past an array's end raises IndexError there and fails the script."""
    assert int(run_bounds_checked(BOUNDSCHECKED_SCAN, tmp_path)) > 10_000
