"""OTLP/JSON, Jaeger JSON and trace-file decoding: the spec fixtures, value by value, and the
edge cases (hex ids, bad ids, time order, malformed bodies, gzip bounds, protobuf files)."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.files import decode_file, gunzip_bounded
from ingest.jaeger_json import decode_jaeger_json
from ingest.otlp_json import decode_otlp_json
from rca.telemetry.spans import DecodeError, SpanBatch, TooLarge
from tests.spanfactory import json_span, otlp_json

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
TRACE_ID = "5b8efff798038103d269b633813fc60c"
START = 1_767_000_000_000_000_000


@pytest.fixture
def examples() -> Path:
    path = DATASETS / "spec-examples"
    if not path.is_dir():
        pytest.skip(f"spec examples not found at {path} (shared datasets sit beside the checkout)")
    return path


def _services(batch: SpanBatch) -> list[str]:
    return [batch.strings[i] for i in batch.service]


def _row(batch: SpanBatch, span_id: int) -> int:
    rows = [i for i, s in enumerate(batch.span_id.tolist()) if s == span_id]
    assert len(rows) == 1, f"span {span_id:x} appears {len(rows)} times"
    return rows[0]


def test_every_trace_file_in_the_spec_examples_decodes(examples: Path) -> None:
    traces = [p for p in sorted(examples.rglob("*.json")) if p.stem not in ("logs", "metrics", "events")]
    counts = {p.name: len(decode_file(p).batch) for p in traces}
    assert counts == {
        "anonymizer_app_uiconv_fixtures_trace_success.json": 2,
        "storage_integration_fixtures_traces_example_trace.json": 5,
        "storage_v2_memory_fixtures_otel_traces_01.json": 4,
        "uimodel_converter_v1_json_fixtures_ui_01.json": 5,
        "trace.json": 1,
    }
    for path in traces:
        assert decode_file(path).rejected == 0, path


@pytest.mark.parametrize("name", ["logs", "metrics", "events"])
def test_other_otlp_signals_are_refused_by_name(examples: Path, name: str) -> None:
    with pytest.raises(DecodeError, match="not traces"):
        decode_file(examples / "opentelemetry-proto" / f"{name}.json")


def test_otlp_spec_trace_reads_hex_ids_parent_and_duration(examples: Path) -> None:
    batch = decode_file(examples / "opentelemetry-proto/trace.json").batch
    assert _services(batch) == ["my.service"]
    assert batch.trace_id[0].tolist() == [0x5B8EFFF798038103, 0xD269B633813FC60C]  # hex, not base64
    assert batch.span_id[0] == 0xEEE19B7EC3C1B174
    assert batch.parent_id[0] == 0xEEE19B7EC3C1B173
    assert batch.kind[0] == 2
    assert batch.duration_ns[0] == 1_000_000_000


def test_jaeger_storage_otlp_fixture_kinds_errors_and_peers(examples: Path) -> None:
    batch = decode_file(examples / "jaeger/storage_v2_memory_fixtures_otel_traces_01.json").batch
    assert batch.kind.tolist() == [2, 3, 4, 5]
    assert batch.error.all()  # status.code 2
    assert batch.parent_id[_row(batch, 4)] == 0x11
    assert batch.trace_id[_row(batch, 3)].tolist() == [2, 0]
    peers = [batch.strings[p] if p >= 0 else None for p in batch.peer]
    assert peers == [None, "service-y", "service-y", None]  # peer.service is read on callers only
    example = decode_file(examples / "jaeger/storage_integration_fixtures_traces_example_trace.json").batch
    assert sorted(set(_services(example))) == ["example-service-1", "example-service-2", "example-service-3"]
    assert (example.duration_ns == 100_000).all() and not example.parent_id.any()


def test_jaeger_ui_trace_parents_services_and_microseconds(examples: Path) -> None:
    batch = decode_file(examples / "jaeger/uimodel_converter_v1_json_fixtures_ui_01.json").batch
    assert (batch.trace_id[:, 0] == 0).all() and (batch.trace_id[:, 1] == 1).all()  # 64-bit id, left-padded
    assert _services(batch) == ["service-x", "service-x", "service-y", "service-y", "service-y"]
    assert batch.parent_id[_row(batch, 3)] == 2
    assert batch.parent_id[_row(batch, 4)] == 2  # its first CHILD_OF points into another trace
    assert batch.parent_id[_row(batch, 5)] == 4
    assert batch.duration_ns.tolist() == [5000, 5000, 5000, 5000, 4000]  # 5 µs and 4 µs
    assert batch.start_ns[0] == 1_485_467_191_639_875_000
    assert batch.error.tolist() == [False, True, False, False, False]
    assert batch.strings[batch.peer[1]] == "service-y"


def test_jaeger_bare_span_list_with_inline_processes(examples: Path) -> None:
    batch = decode_file(examples / "jaeger/anonymizer_app_uiconv_fixtures_trace_success.json").batch
    assert _services(batch) == ["16af988c443cff37", "3c220036602f839e"]
    assert batch.kind.tolist() == [2, 3]
    assert batch.duration_ns.tolist() == [267_037_000, 32_782_000]
    assert batch.parent_id[1] == batch.span_id[0] == 0x7606DDFE69932D34
    assert batch.error.tolist() == [False, True]  # a bool tag written as the string "true"


def test_jaeger_data_wrapper_tags_and_parent_fallback() -> None:
    trace = {
        "traceID": "abc",
        "spans": [
            {
                "spanID": "1",
                "operationName": "root",
                "startTime": 10,
                "duration": 3,
                "processID": "p1",
                "tags": [
                    {"key": "otel.status_code", "type": "string", "value": "ERROR"},
                    {"key": "span.kind", "type": "string", "value": "CONSUMER"},
                ],
            },
            {
                "spanID": "2",
                "parentSpanID": "1",
                "operationName": "child",
                "startTime": 11,
                "duration": 1,
                "processID": "p1",
                "references": [{"refType": "FOLLOWS_FROM", "traceID": "def", "spanID": "9"}],
            },
        ],
        "processes": {"p1": {"serviceName": "api", "tags": [{"key": "host.name", "type": "string", "value": "h"}]}},
    }
    batch = decode_jaeger_json(json.dumps({"data": [trace]})).batch
    assert _services(batch) == ["api", "api"]
    assert batch.trace_id[0].tolist() == [0, 0xABC]
    assert batch.error.tolist() == [True, False] and batch.kind.tolist() == [5, 0]
    assert batch.parent_id.tolist() == [0, 1]  # the other trace's reference is not a parent
    assert batch.end_ns[0] == 13_000


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"data": {"traceID": "1"}}', r"\$\.data"),
        (b'{"data": [{"traceID": "1"}]}', r"\$\.data\[0\].*spans"),
        (b'{"data": [{"spans": [{"spanID": "1", "processID": "p9"}], "processes": {}}]}', "processID"),
        (b'{"data": [{"spans": [{"spanID": "1", "startTime": "soon"}]}]}', r"spans\[0\]\.startTime"),
        (b"[{", "malformed Jaeger JSON"),
    ],
)
def test_malformed_jaeger_json_names_the_field(body: bytes, field: str) -> None:
    with pytest.raises(DecodeError, match=field):
        decode_jaeger_json(body)


def test_hex_ids_are_not_read_as_base64() -> None:
    as_base64 = base64.b64encode(bytes.fromhex(TRACE_ID)).decode()  # what protobuf's json_format expects
    result = decode_otlp_json(
        otlp_json([json_span("eee19b7ec3c1b174"), json_span("eee19b7ec3c1b175", traceId=as_base64)])
    )
    assert result.batch.trace_id.tolist() == [[0x5B8EFFF798038103, 0xD269B633813FC60C]]
    assert result.message == "1 span(s): traceId is not a hex string"


def test_bad_ids_and_end_before_start_are_rejected_others_kept() -> None:
    result = decode_otlp_json(
        otlp_json(
            [
                json_span("eee19b7ec3c1b174"),
                json_span("eee19b7e"),
                json_span("eee19b7ec3c1b176", parentSpanId="0102"),
                json_span("aaa19b7ec3c1b174", endTimeUnixNano=str(START - 1)),
            ]
        )
    )
    assert result.batch.span_id.tolist() == [0xEEE19B7EC3C1B174]
    assert result.rejected == 3
    assert "span_id must be 8 bytes" in result.message
    assert "parent_span_id must be empty or 8 bytes" in result.message
    assert "1 span(s): end_time_unix_nano is before start_time_unix_nano" in result.message


def test_otlp_json_snake_case_enum_names_numbers_and_attribute_values() -> None:
    attributes = [
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "42"}},
        {"key": "gen_ai.latency.e2e", "value": {"doubleValue": 1.5}},
        {"key": "peer.service", "value": {"stringValue": "db"}},
        {"key": "gpu.id", "value": {"int_value": 3}},
        {"key": "ignored", "value": {"bytesValue": "not base64 at all!"}},
    ]
    span = {
        "trace_id": TRACE_ID,
        "span_id": "eee19b7ec3c1b174",
        "kind": "SPAN_KIND_CLIENT",
        "start_time_unix_nano": START,
        "end_time_unix_nano": START + 5,
        "attributes": attributes,
        "status": {"code": "STATUS_CODE_ERROR"},
        "unknownField": {"x": 1},
    }
    resource = {"attributes": [{"key": "host.name", "value": {"stringValue": "node1"}}]}
    body = json.dumps({"resource_spans": [{"resource": resource, "scope_spans": [{"spans": [span]}]}]})
    batch = decode_otlp_json(body.encode()).batch
    assert batch.kind[0] == 3 and bool(batch.error[0]) and batch.duration_ns[0] == 5
    assert _services(batch) == ["unknown_service"]
    assert batch.strings[batch.peer[0]] == "db"
    assert batch.strings[batch.resource[0]] == "gpu:node1/3"
    assert batch.signals[0, 8] == 42 and batch.signals[0, 5] == 1.5


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "malformed OTLP/JSON"),
        (b"[]", "must be an object"),
        (b'{"resourceSpans": 3}', r"\$\.resourceSpans must be a list"),
        (b'{"resourceSpans": [{"resource": []}]}', r"\$\.resourceSpans\[0\]\.resource must be an object"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "x"}]}]}]}',
            r"scopeSpans\[0\]\.spans\[0\]\.startTimeUnixNano",
        ),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"kind": "SPAN_KIND_FOO"}]}]}]}', r"spans\[0\]\.kind"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"endTimeUnixNano": "1e400"}]}]}]}', "endTimeUnixNano"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"endTimeUnixNano": 18446744073709551615}]}]}]}',
            r"outside \[0, 2\*\*63\)",
        ),
    ],
)
def test_malformed_otlp_json_names_the_field(body: bytes, field: str) -> None:
    with pytest.raises(DecodeError, match=field):
        decode_otlp_json(body)


def test_gzip_round_trip_and_multi_member(examples: Path, tmp_path: Path) -> None:
    raw = (examples / "opentelemetry-proto/trace.json").read_bytes()
    assert gunzip_bounded(gzip.compress(raw), len(raw)) == raw
    assert gunzip_bounded(gzip.compress(b"ab") + gzip.compress(b"cd"), 4) == b"abcd"
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(raw))
    assert decode_file(path).batch.span_id.tolist() == [0xEEE19B7EC3C1B174]


def test_gzip_bomb_and_corruption_are_refused() -> None:
    bomb = gzip.compress(b"\0" * (100 << 20))
    assert len(bomb) < 200_000
    with pytest.raises(TooLarge, match="exceeds 1048576 bytes"):
        gunzip_bounded(bomb, 1 << 20)
    with pytest.raises(DecodeError, match="corrupt gzip"):
        gunzip_bounded(b"\x1f\x8b\x08garbage", 1 << 20)
    with pytest.raises(DecodeError, match="truncated gzip"):
        gunzip_bounded(bomb[: len(bomb) // 2], 200 << 20)


def test_protobuf_file_and_unknown_json_through_decode_file(tmp_path: Path) -> None:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    attribute = resource_spans.resource.attributes.add()
    attribute.key, attribute.value.string_value = "service.name", "checkout"
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = bytes.fromhex(TRACE_ID), bytes.fromhex("0102030405060708"), "pay"
    span.start_time_unix_nano, span.end_time_unix_nano = START, START + 7
    path = tmp_path / "trace.pb"
    path.write_bytes(request.SerializeToString())
    batch = decode_file(path).batch
    assert _services(batch) == ["checkout"] and batch.duration_ns.tolist() == [7]
    assert batch.span_id.tolist() == [0x0102030405060708]
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(DecodeError, match=r"other\.json: JSON is neither"):
        decode_file(other)
