"""OTLP log decoding, protobuf and OTLP/JSON: requests built with the `opentelemetry.proto` classes
and the spec's example, field by field; severity inference, event time, the service fallbacks,
bodies that are not strings, rejections with reasons, malformed input, log files (gzip or not);
and the decoded records counted in the graph's window tables."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from ingest.files import decode_log_file
from ingest.otlp_logs import decode_logs_protobuf
from ingest.otlp_logs_json import MAX_BODY_DEPTH, decode_logs_json
from rca.graph.accumulators import LogSum
from rca.graph.series import window_series
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.logs import LogBatch, LogDecodeResult
from rca.telemetry.spans import DecodeError
from tests.metricrequests import any_value

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
T0 = 1_767_000_000_000_000_000
TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")
SPAN = bytes.fromhex("eee19b7ec3c1b174")


def record(body: str = "GET /cart 200", **fields: Any) -> LogRecord:
    fields.setdefault("time_unix_nano", T0)
    message = LogRecord(**fields)
    message.body.string_value = body
    return message


def request(*resources: tuple[dict[str, str], list[LogRecord]]) -> ExportLogsServiceRequest:
    out = ExportLogsServiceRequest()
    for attributes, records in resources:
        resource_logs = out.resource_logs.add()
        for key, value in attributes.items():
            kv = resource_logs.resource.attributes.add()
            kv.key, kv.value.string_value = key, value
        resource_logs.scope_logs.add().log_records.extend(records)
    return out


def otlp_json(message: ExportLogsServiceRequest, snake_case: bool = False) -> bytes:
    """The request in OTLP/JSON: protobuf's JSON mapping with hex ids and integer enums."""
    document = MessageToDict(message, use_integers_for_enums=True, preserving_proto_field_name=snake_case)
    logs = "resource_logs" if snake_case else "resourceLogs"
    scopes, records = ("scope_logs", "log_records") if snake_case else ("scopeLogs", "logRecords")
    for resource_logs in document[logs]:
        for scope_logs in resource_logs[scopes]:
            for rec in scope_logs.get(records, []):
                for key in ("trace_id", "span_id") if snake_case else ("traceId", "spanId"):
                    if key in rec:
                        rec[key] = base64.b64decode(rec[key]).hex()
    return json.dumps(document).encode()


def both(message: ExportLogsServiceRequest) -> list[LogDecodeResult]:
    """The request decoded from protobuf, camelCase OTLP/JSON and snake_case OTLP/JSON."""
    data = message.SerializeToString()
    return [
        decode_logs_protobuf(data),
        decode_logs_json(otlp_json(message)),
        decode_logs_json(otlp_json(message, True)),
    ]


def services(batch: LogBatch) -> list[str]:
    return [batch.strings[i] for i in batch.service.tolist()]


def test_records_decode_field_by_field_from_protobuf_and_json() -> None:
    message = request(
        (
            {"service.name": "cart", "host.name": "n1"},
            [
                record("added item 42", trace_id=TRACE, span_id=SPAN, severity_number=9, severity_text="INFO"),
                record("cart empty", time_unix_nano=T0 + 7, severity_number=13),
            ],
        ),
        ({"service.name": "checkout"}, [record("paid", time_unix_nano=T0 + 9, severity_number=17)]),
    )
    for result in both(message):
        batch = result.batch
        assert result.rejections == ()
        assert services(batch) == ["cart", "cart", "checkout"]
        assert batch.time_ns.tolist() == [T0, T0 + 7, T0 + 9]
        assert batch.trace_id.tolist() == [[0x5B8EFFF798038103, 0xD269B633813FC60C], [0, 0], [0, 0]]
        assert batch.span_id.tolist() == [0xEEE19B7EC3C1B174, 0, 0]
        assert batch.severity.tolist() == [9, 13, 17]
        assert batch.body == ("added item 42", "cart empty", "paid")
        assert batch.is_error.tolist() == [False, False, True]
        assert batch.strings == ("cart", "checkout")


def test_the_spec_example_decodes(tmp_path: Path) -> None:
    path = DATASETS / "spec-examples" / "opentelemetry-proto" / "logs.json"
    if not path.is_file():
        pytest.skip(f"spec examples not found at {path} (shared datasets sit beside the checkout)")
    result = decode_log_file(path)
    batch = result.batch
    assert result.rejected == 0 and len(batch) == 1
    assert services(batch) == ["my.service"]
    assert batch.time_ns.tolist() == [1544712660300000000]
    assert batch.trace_id.tolist() == [[0x5B8EFFF798038103, 0xD269B633813FC60C]]
    assert batch.span_id.tolist() == [0xEEE19B7EC3C1B174]
    assert batch.severity.tolist() == [10]
    assert batch.body == ("Example log record",)


@pytest.mark.parametrize(
    ("number", "text", "body", "expected"),
    [
        (21, "", "all fine", 21),
        (0, "WARNING", "all fine", 13),
        (0, "Error", "all fine", 17),
        (0, "", "payment ERROR: card declined", 17),
        (0, "", "java.lang.NullPointerException: order is null", 17),
        (0, "", 'Traceback (most recent call last):\n  File "x.py", line 1', 17),
        (0, "", "request failed\n    at com.shop.Cart.add(Cart.java:42)", 17),
        (0, "", "disk almost full, WARN", 13),
        (0, "", "GET /cart 200", 9),
    ],
)
def test_severity_comes_from_the_number_else_the_text_else_the_body(
    number: int, text: str, body: str, expected: int
) -> None:
    message = request(({"service.name": "cart"}, [record(body, severity_number=number, severity_text=text)]))
    for result in both(message):
        assert result.batch.severity.tolist() == [expected]


def test_json_accepts_severity_names_and_int64_as_numbers() -> None:
    document = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": T0,
                                "severityNumber": "SEVERITY_NUMBER_ERROR",
                                "body": {"stringValue": "x"},
                            },
                            {"observedTimeUnixNano": str(T0 + 1), "severityNumber": 99},
                        ]
                    }
                ]
            }
        ]
    }
    result = decode_logs_json(json.dumps(document))
    assert result.batch.time_ns.tolist() == [T0, T0 + 1]
    assert result.batch.severity.tolist() == [17, 24]  # out of range reads as the nearest number
    assert result.batch.body == ("x", "")


def test_event_time_falls_back_to_the_observed_time_and_neither_is_rejected() -> None:
    message = request(
        (
            {"service.name": "cart"},
            [
                record("seen", time_unix_nano=0, observed_time_unix_nano=T0 + 5),
                record("both", time_unix_nano=T0, observed_time_unix_nano=T0 + 5),
                record("never", time_unix_nano=0),
            ],
        )
    )
    for result in both(message):
        assert result.batch.time_ns.tolist() == [T0 + 5, T0]
        assert result.batch.body == ("seen", "both")
        assert result.rejected == 1
        assert "no timestamp" in result.message


def test_bad_id_lengths_are_rejected_with_reasons_and_zero_ids_count_as_absent() -> None:
    message = request(
        (
            {"service.name": "cart"},
            [
                record("short trace", trace_id=TRACE[:15], span_id=SPAN),
                record("short span", trace_id=TRACE, span_id=SPAN[:7]),
                record("zero ids", trace_id=bytes(16), span_id=bytes(8)),
                record("good", trace_id=TRACE, span_id=SPAN),
                record("late", time_unix_nano=1 << 63),
            ],
        )
    )
    result = decode_logs_protobuf(message.SerializeToString())
    assert result.batch.body == ("zero ids", "good")
    assert result.batch.span_id.tolist() == [0, 0xEEE19B7EC3C1B174]
    assert result.batch.trace_id[0].tolist() == [0, 0]
    assert result.rejected == 3
    assert "trace_id must be empty or 16 bytes" in result.message
    assert "span_id must be empty or 8 bytes" in result.message
    assert "below 2^63" in result.message
    json_result = decode_logs_json(otlp_json(message))
    assert json_result.batch.body == ("zero ids", "good")
    assert json_result.rejected == 3


def test_json_records_with_fields_of_the_wrong_type_are_rejected_with_reasons() -> None:
    good = {"timeUnixNano": str(T0), "body": {"stringValue": "ok"}}
    deep: dict[str, Any] = {"stringValue": "bottom"}
    for _ in range(MAX_BODY_DEPTH + 1):
        deep = {"arrayValue": {"values": [deep]}}
    bad = [
        ({"traceId": "zz"}, "traceId is not a hex string"),
        ({"spanId": 12}, "spanId is not a hex string"),
        ({"timeUnixNano": "soon"}, "timeUnixNano must be an integer"),
        ({"observedTimeUnixNano": -1}, "observedTimeUnixNano must be an integer"),
        ({"severityNumber": "LOUD"}, "severityNumber must be an integer"),
        ({"severityText": 3}, "severityText must be a string"),
        ({"body": "bare"}, "body must be an AnyValue"),
        ({"body": {"bytesValue": "!!"}}, "body must be an AnyValue"),
        ({"body": {"kvlistValue": {"values": [{"value": {}}]}}}, "body must be an AnyValue"),
        ({"body": deep}, f"body nests deeper than {MAX_BODY_DEPTH} levels"),
    ]
    records = [good] + [{**good, **fields} for fields, _ in bad]
    result = decode_logs_json(json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}))
    assert result.batch.body == ("ok",)
    assert result.rejected == len(bad)
    for _, reason in bad:
        assert reason in result.message


@pytest.mark.parametrize(
    ("attributes", "service"),
    [
        ({"service.name": "cart", "k8s.deployment.name": "cart-v2"}, "cart"),
        ({"k8s.deployment.name": "cart-v2", "k8s.pod.name": "cart-v2-7d9f8b6c5d-x2x4z"}, "cart-v2"),
        ({"k8s.pod.name": "payment-7d9f8b6c5d-x2x4z"}, "payment"),
        ({"host.name": "n1"}, "unknown_service"),
    ],
)
def test_the_service_falls_back_to_the_deployment_then_the_pod(attributes: dict[str, str], service: str) -> None:
    for result in both(request((attributes, [record()]))):
        assert services(result.batch) == [service]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (42, "42"),
        (-1.5, "-1.5"),
        (True, "true"),
        (b"\x01\xff", "01ff"),
        ("", ""),
        (None, ""),
        ({"status": 500, "path": "/cart", "tags": ["a", 1.0]}, '{"path":"/cart","status":500,"tags":["a",1.0]}'),
        ([1, "two", None, {"k": b"\x00"}], '[1,"two",null,{"k":"00"}]'),
    ],
)
def test_bodies_that_are_not_strings_become_stable_text(value: object, text: str) -> None:
    message = request(({"service.name": "cart"}, [record()]))
    message.resource_logs[0].scope_logs[0].log_records[0].body.CopyFrom(any_value(value))
    for result in both(message):
        assert result.batch.body == (text,)


def test_a_structured_loggers_line_or_map_body_is_its_message_at_its_level() -> None:
    """zap's JSON lines tailed as text, and a map body: templates are made of the message; the
    level field stands where the record names no severity, and yields to one it names."""
    zap = '{"level":"warn","ts":1765.25,"caller":"cart/load.go:57","msg":"cache miss for key 12","error":"x"}'
    mapped = record()
    mapped.body.CopyFrom(any_value({"message": "Order 7 placed", "level": "error", "order": 7}))
    message = request(({"service.name": "cart"}, [record(zap), mapped, record(zap, severity_number=17)]))
    for result in both(message):
        assert result.batch.body == ("cache miss for key 12", "Order 7 placed", "cache miss for key 12")
        assert result.batch.severity.tolist() == [13, 17, 17]


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"not json {", "malformed OTLP/JSON"),
        (b"[1, 2]", "must be an object with resourceLogs"),
        (b'{"resourceLogs": {}}', r"\$.resourceLogs must be a list"),
        (b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [7]}]}]}', r"logRecords\[0\] must be an object"),
        (b'{"resourceLogs": [{"resource": []}]}', r"resourceLogs\[0\].resource must be an object"),
        (b'{"resourceSpans": []}', "resourceSpans is not logs"),
        (b"[" * 100_000, "malformed OTLP/JSON"),
    ],
)
def test_malformed_json_is_refused_naming_the_field(body: bytes, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        decode_logs_json(body)


@pytest.mark.parametrize(
    "data", [b"\xff\xff\xff", b"\x0a\x05\x12\x03", request(({}, [record()])).SerializeToString()[:-3]]
)
def test_malformed_protobuf_is_refused(data: bytes) -> None:
    with pytest.raises(DecodeError, match="malformed ExportLogsServiceRequest"):
        decode_logs_protobuf(data)


def test_log_files_decode_gzipped_or_not_and_refuse_traces(tmp_path: Path) -> None:
    message = request(({"service.name": "cart"}, [record("one"), record("two", severity_text="ERROR")]))
    files = {
        "logs.pb": message.SerializeToString(),
        "logs.pb.gz": gzip.compress(message.SerializeToString()),
        "logs.json.gz": gzip.compress(otlp_json(message)),
        "logs.json": b"  \n" + otlp_json(message),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        result = decode_log_file(tmp_path / name)
        assert result.batch.body == ("one", "two"), name
        assert result.batch.severity.tolist() == [9, 17], name
    refused = {
        "traces.json": (b'{"resourceSpans": []}', "traces"),
        "jaeger.json": (b'{"data": []}', "not OTLP/JSON logs"),
        "bad.gz": (b"\x1f\x8b\x08junk", "gzip"),
    }
    for name, (data, match) in refused.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(DecodeError, match=match) as info:
            decode_log_file(tmp_path / name)
        assert str(info.value).startswith(str(tmp_path / name))


def test_decoded_records_count_in_the_window_tables() -> None:
    message = request(
        (
            {"service.name": "cart"},
            [record(f"added item {i}", time_unix_nano=T0 + i) for i in range(5)]
            + [record("checkout failed", time_unix_nano=T0 + 6, severity_number=17)],
        ),
        ({"k8s.pod.name": "payment-7d9f8b6c5d-x2x4z"}, [record("charged card 7", time_unix_nano=T0 + 8)]),
    )
    graph = ServiceGraph()
    graph.add_logs(decode_logs_protobuf(message.SerializeToString()).batch)
    graph.add_logs(decode_logs_json(otlp_json(message)).batch)
    logs = window_series(graph, T0, T0, T0 + 1).logs
    nodes = logs.keys >> 32
    records, errors = logs.sums[:, -1, LogSum.RECORDS], logs.sums[:, -1, LogSum.ERRORS]
    cart, payment = graph.names.node_ids["cart"], graph.names.node_ids["payment"]
    assert records[nodes == cart].sum() == 12 and errors[nodes == cart].sum() == 2
    assert records[nodes == payment].sum() == 2 and errors[nodes == payment].sum() == 0
    assert np.count_nonzero(nodes == cart) == 2  # `added item <*>` and `checkout failed`
