"""SpanBatch → OTLP protobuf → SpanBatch gives back the same spans; LogBatch likewise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from benchmarks.nezha import default_root, read_log_csv, read_trace_csv
from ingest.otlp_encode import encode_batch, encode_log_batch
from ingest.otlp_logs import decode_logs_protobuf
from ingest.otlp_proto import decode_protobuf
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.conventions import AttrValue
from rca.telemetry.logs import LogBatch
from rca.telemetry.spans import KIND_CLIENT, KIND_SERVER, Signal, SpanBatch

NEZHA_MINUTE = default_root() / "nezha-dev" / "2023-01-29" / "trace" / "08_43_trace.csv.gz"
NEZHA_LOG_MINUTE = default_root() / "nezha-dev" / "2023-01-29" / "log" / "08_43_log.csv.gz"


def _rows(batch: SpanBatch) -> set[tuple[object, ...]]:
    """Each span with its strings resolved, order- and interning-free."""
    name = {-1: None, **dict(enumerate(batch.strings))}
    return {
        (
            tuple(batch.trace_id[r].tolist()),
            int(batch.span_id[r]),
            int(batch.parent_id[r]),
            name[int(batch.service[r])],
            name[int(batch.operation[r])],
            name[int(batch.peer[r])],
            name[int(batch.resource[r])],
            int(batch.kind[r]),
            int(batch.start_ns[r]),
            int(batch.end_ns[r]),
            bool(batch.error[r]),
            tuple("nan" if math.isnan(v) else v for v in batch.signals[r].tolist()),
        )
        for r in range(len(batch))
    }


def _decoded(messages: list[bytes]) -> list[SpanBatch]:
    results = [decode_protobuf(message) for message in messages]
    assert all(result.rejected == 0 for result in results)
    return [result.batch for result in results]


def _handmade() -> SpanBatch:
    builder = SpanBatchBuilder()
    trace = bytes(range(1, 17))
    spans: list[tuple[bytes, bytes, str, str, int, bool, dict[str, AttrValue], dict[str, AttrValue]]] = [
        (
            b"\x01" * 8,
            b"",
            "gateway",
            "POST /v1/chat",
            KIND_CLIENT,
            False,
            {"peer.service": "llm", "http.request.header.x-priority": "high"},
            {},
        ),
        (
            b"\x02" * 8,
            b"\x01" * 8,
            "llm",
            "generate",
            KIND_SERVER,
            True,
            {
                "gen_ai.latency.time_in_queue": 0.25,
                "gen_ai.request.priority": 0,
                "gen_ai.usage.prompt_tokens": 812,
                "gpu.id": 3,
                "gpu.numa_node": 1,
                "kv_cache.usage": 0.9,
            },
            {"host.name": "node-a", "process.numa_node": 0},
        ),
        (
            b"\x03" * 8,
            b"\x02" * 8,
            "llm",
            "nccl:all_reduce",
            KIND_CLIENT,
            False,
            {"nccl.bytes": 1 << 20, "gpu.id": "0", "db.system": "x"},
            {},
        ),
        (
            b"\xff" * 8,
            b"\x02" * 8,
            "llm",
            "queue",
            1,
            False,
            {"gen_ai.latency.time_in_queue": 0.5, "gen_ai.request.priority": 4, "gpu.numa_node": 0},
            {"process.numa_node": 0},
        ),
    ]
    for i, (span, parent, service, name, kind, error, attributes, resource) in enumerate(spans):
        start = 1_700_000_000_000_000_000 + i * 1000
        builder.add(
            trace,
            span,
            parent,
            service,
            name,
            kind,
            start,
            start + 500 + i,
            error,
            attributes,
            resource,
        )
    return builder.build().batch


def test_nezha_minute_round_trips() -> None:
    if not NEZHA_MINUTE.exists():
        pytest.skip(f"Nezha dataset absent: expected {NEZHA_MINUTE} (see shared/datasets/README.md)")
    batch = read_trace_csv(NEZHA_MINUTE)
    messages = encode_batch(batch, max_spans=len(batch))
    assert len(messages) == 1
    (decoded,) = _decoded(messages)
    assert len(decoded) == len(batch)
    assert _rows(decoded) == _rows(batch)


def test_handmade_batch_keeps_signals_peer_gpu_and_errors() -> None:
    batch = _handmade()
    assert batch.signals[0, Signal.URGENT] == 1.0  # the caller's mark alone, for its children's queue times
    assert not np.isnan(batch.signals[1, Signal.QUEUE_TIME_URGENT])
    assert not np.isnan(batch.signals[3, Signal.QUEUE_TIME_ORDINARY])
    assert batch.signals[1, Signal.NUMA_MISMATCH] == 1.0
    assert batch.signals[3, Signal.NUMA_MISMATCH] == 0.0
    assert not np.isnan(batch.signals[2, Signal.NCCL_LATENCY])
    (decoded,) = _decoded(encode_batch(batch))
    assert _rows(decoded) == _rows(batch)
    assert {decoded.strings[i] for i in decoded.resource if i >= 0} == {
        "gpu:node-a/3",
        "gpu:unknown-host/0",
    }


def test_resource_spans_group_by_service() -> None:
    request = ExportTraceServiceRequest()
    request.ParseFromString(encode_batch(_handmade())[0])
    services = [
        next(kv.value.string_value for kv in rs.resource.attributes if kv.key == "service.name")
        for rs in request.resource_spans
    ]
    assert sorted(set(services)) == ["gateway", "llm"]
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert spans[1].status.code == 2 and spans[0].status.code == 0
    assert spans[0].trace_id == bytes(range(1, 17)) and spans[0].parent_span_id == b""


@pytest.mark.parametrize("max_spans", [1, 3, 4])
def test_max_spans_splits_messages(max_spans: int) -> None:
    batch = _handmade()
    parts = _decoded(encode_batch(batch, max_spans))
    assert len(parts) == math.ceil(len(batch) / max_spans)
    assert all(len(part) <= max_spans for part in parts)
    assert set().union(*map(_rows, parts)) == _rows(batch)


def test_empty_batch_and_bad_limit() -> None:
    assert encode_batch(SpanBatch.empty()) == []
    with pytest.raises(ValueError, match="max_spans"):
        encode_batch(_handmade(), 0)


def _log_rows(batch: LogBatch) -> list[tuple[object, ...]]:
    """Each record with its service resolved, in row order (a message groups them by service)."""
    return [
        (
            int(batch.time_ns[r]),
            batch.strings[int(batch.service[r])],
            tuple(batch.trace_id[r].tolist()),
            int(batch.span_id[r]),
            int(batch.severity[r]),
            batch.body[r],
        )
        for r in range(len(batch))
    ]


def _decoded_logs(messages: list[bytes]) -> list[LogBatch]:
    results = [decode_logs_protobuf(message) for message in messages]
    assert all(result.rejected == 0 for result in results)
    return [result.batch for result in results]


def _handmade_logs() -> LogBatch:
    """Records of two services: joined to a span, without ids, an error, a warning, a top-bit id."""
    return LogBatch(
        time_ns=np.array([1_700_000_000_000_000_000 + i * 1000 for i in range(5)], np.int64),
        service=np.array([0, 1, 0, 1, 1], np.int32),
        trace_id=np.array([[1, 2], [0, 0], [1, 2], [0, 0], [1 << 63, 5]], np.uint64),
        span_id=np.array([7, 0, 8, 0, (1 << 64) - 1], np.uint64),
        severity=np.array([9, 17, 13, 21, 5], np.int8),
        body=("engine step 12 done", "CUDA out of memory", "slow batch", "Traceback (most recent call last)", ""),
        strings=("llm", "gateway"),
    )


def test_log_batch_round_trips_records_services_ids_severity_and_bodies() -> None:
    batch = _handmade_logs()
    (decoded,) = _decoded_logs(encode_log_batch(batch))
    assert sorted(_log_rows(decoded), key=repr) == sorted(_log_rows(batch), key=repr)
    assert set(decoded.strings) == {"llm", "gateway"}


def test_log_resources_group_by_service_and_ids_only_where_named() -> None:
    request = ExportLogsServiceRequest()
    request.ParseFromString(encode_log_batch(_handmade_logs())[0])
    services = [rl.resource.attributes[0].value.string_value for rl in request.resource_logs]
    assert services == ["llm", "gateway"]
    records = [r for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records]
    assert [r.severity_number for r in records] == [9, 13, 17, 21, 5]  # grouped: llm's, then gateway's
    assert records[0].trace_id == (1).to_bytes(8, "big") + (2).to_bytes(8, "big")
    assert records[0].span_id == (7).to_bytes(8, "big")
    assert records[2].trace_id == b"" and records[2].span_id == b""
    assert all(r.time_unix_nano == r.observed_time_unix_nano for r in records)


@pytest.mark.parametrize("max_records", [1, 2, 5])
def test_max_records_splits_log_messages(max_records: int) -> None:
    batch = _handmade_logs()
    parts = _decoded_logs(encode_log_batch(batch, max_records))
    assert len(parts) == math.ceil(len(batch) / max_records)
    assert all(len(part) <= max_records for part in parts)
    for lo, part in zip(range(0, len(batch), max_records), parts, strict=True):  # consecutive rows per message
        expected = _log_rows(batch)[lo : lo + max_records]
        assert sorted(_log_rows(part), key=repr) == sorted(expected, key=repr)


def test_empty_log_batch_and_bad_limit() -> None:
    assert encode_log_batch(LogBatch.empty()) == []
    with pytest.raises(ValueError, match="max_records"):
        encode_log_batch(_handmade_logs(), 0)


def test_nezha_log_minute_round_trips() -> None:
    if not NEZHA_LOG_MINUTE.exists():
        pytest.skip(f"Nezha dataset absent: expected {NEZHA_LOG_MINUTE} (see shared/datasets/README.md)")
    batch = read_log_csv(NEZHA_LOG_MINUTE)
    (decoded,) = _decoded_logs(encode_log_batch(batch, max_records=len(batch)))
    assert sorted(_log_rows(decoded), key=repr) == sorted(_log_rows(batch), key=repr)
