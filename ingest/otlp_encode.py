"""Span and log records → OTLP protobuf: the inverse of `ingest.otlp_proto` and
`ingest.otlp_logs`, for replaying batches (datasets, benchmarks) through the real ingest path.

A span's instance goes back as its resource's `service.instance.id` (no pod name is written, so
the decoders read it back as the instance), so replicas under one service name stay apart. A GPU
node's host goes back as `host.name`, except the placeholder a decoder gives a GPU node whose
resource names no host: written, it would come back as an instance the span did not have. So a
batch a decoder made comes back the same.

Signals go back to the attributes they are read from. The derived ones come back as what
derives them: a span's urgency mark (which splits its queue time into urgent and ordinary) as
`gen_ai.request.priority` 0/1, a NUMA mismatch as `gpu.numa_node` 0/1 against a resource
`process.numa_node` of 0, NCCL latency from the span's own `nccl:` name and duration (it is not
encoded otherwise).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import ScopeLogs
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans

from ingest.otlp_proto import STATUS_ERROR
from rca.telemetry.conventions import (
    GPU_ID,
    GPU_NUMA,
    HOST_NAME,
    PRIORITY_LEVEL,
    PROCESS_NUMA,
    SERVICE_INSTANCE,
    SERVICE_NAME,
    SIGNAL_ATTRIBUTES,
    UNKNOWN_HOST,
)
from rca.telemetry.logs import LogBatch
from rca.telemetry.spans import Signal, SpanBatch

SCOPE_NAME = "rca.otlp_encode"
GPU_PREFIX = "gpu:"
PEER_SERVICE = "peer.service"

# The first attribute named for each signal (e.g. `gen_ai.usage.input_tokens`).
_SIGNAL_KEY: dict[Signal, str] = {signal: key for key, signal in reversed(list(SIGNAL_ATTRIBUTES.items()))}

# (service, host.name or None, service.instance.id or None, whether the resource carries process.numa_node)
ResourceKey = tuple[str, str | None, str | None, bool]


def _value(value: str | int | float) -> AnyValue:
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    return AnyValue(double_value=value)


def _gpu_node(batch: SpanBatch, row: int) -> tuple[str, str] | None:
    """(host, gpu id) of the span's `gpu:{host}/{id}` resource node, if it has one."""
    index = int(batch.resource[row])
    if index < 0:
        return None
    host, _, gpu = batch.strings[index].removeprefix(GPU_PREFIX).rpartition("/")
    return host, gpu


def _resource_key(batch: SpanBatch, row: int) -> ResourceKey:
    node = _gpu_node(batch, row)
    numa = not math.isnan(batch.signals[row, Signal.NUMA_MISMATCH])
    instance = int(batch.instance[row])
    return (
        batch.strings[batch.service[row]],
        None if node is None or node[0] == UNKNOWN_HOST else node[0],
        None if instance < 0 else batch.strings[instance],
        numa,
    )


def _resource_attributes(key: ResourceKey) -> list[KeyValue]:
    service, host, instance, numa = key
    attributes = [KeyValue(key=SERVICE_NAME, value=_value(service))]
    if host is not None:
        attributes.append(KeyValue(key=HOST_NAME, value=_value(host)))
    if instance is not None:
        attributes.append(KeyValue(key=SERVICE_INSTANCE, value=_value(instance)))
    if numa:
        attributes.append(KeyValue(key=PROCESS_NUMA, value=_value(0)))
    return attributes


def _signal_attributes(batch: SpanBatch, row: int) -> dict[str, str | int | float]:
    signals = batch.signals[row]
    attributes: dict[str, str | int | float] = {
        key: float(signals[signal]) for signal, key in _SIGNAL_KEY.items() if not math.isnan(signals[signal])
    }
    if not math.isnan(signals[Signal.URGENT]):
        attributes[PRIORITY_LEVEL] = 0 if signals[Signal.URGENT] else 1
    if not math.isnan(signals[Signal.NUMA_MISMATCH]):
        attributes[GPU_NUMA] = int(signals[Signal.NUMA_MISMATCH] != 0)
    return attributes


def _span_attributes(batch: SpanBatch, row: int) -> list[KeyValue]:
    attributes = _signal_attributes(batch, row)
    if batch.peer[row] >= 0:
        attributes[PEER_SERVICE] = batch.strings[batch.peer[row]]
    node = _gpu_node(batch, row)
    if node is not None:
        attributes[GPU_ID] = node[1]
    return [KeyValue(key=key, value=_value(value)) for key, value in attributes.items()]


def _id_bytes(words: npt.NDArray[np.uint64]) -> bytes:
    """Big-endian id bytes, as `SpanBatchBuilder` reads them."""
    return words.astype(">u8").tobytes()


def _message(batch: SpanBatch, rows: range) -> bytes:
    """One ExportTraceServiceRequest of `rows`, one ResourceSpans per resource key."""
    request = ExportTraceServiceRequest()
    scopes: dict[ResourceKey, ScopeSpans] = {}
    for row in rows:
        key = _resource_key(batch, row)
        scope = scopes.get(key)
        if scope is None:
            resource_spans = request.resource_spans.add()
            resource_spans.resource.attributes.extend(_resource_attributes(key))
            scope = scopes[key] = resource_spans.scope_spans.add()
            scope.scope.name = SCOPE_NAME
        span = scope.spans.add()
        span.trace_id = _id_bytes(batch.trace_id[row])
        span.span_id = _id_bytes(batch.span_id[row : row + 1])
        if batch.parent_id[row]:
            span.parent_span_id = _id_bytes(batch.parent_id[row : row + 1])
        span.name = batch.strings[batch.operation[row]]
        span.kind = int(batch.kind[row])
        span.start_time_unix_nano = int(batch.start_ns[row])
        span.end_time_unix_nano = int(batch.end_ns[row])
        if batch.error[row]:
            span.status.code = STATUS_ERROR
        span.attributes.extend(_span_attributes(batch, row))
    return bytes(request.SerializeToString())


def encode_batch(batch: SpanBatch, max_spans: int = 2048) -> list[bytes]:
    """The batch as serialized OTLP ExportTraceServiceRequest messages of at most `max_spans`
    spans each, rows in order; an empty batch gives no message."""
    if max_spans < 1:
        raise ValueError(f"max_spans must be at least 1, got {max_spans}")
    n = len(batch)
    return [_message(batch, range(lo, min(lo + max_spans, n))) for lo in range(0, n, max_spans)]


def _log_message(batch: LogBatch, rows: range) -> bytes:
    """One ExportLogsServiceRequest of `rows`, one ResourceLogs per service; a record's time is
    both its time and when it was observed, ids only where it names a span."""
    request = ExportLogsServiceRequest()
    scopes: dict[int, ScopeLogs] = {}
    for row in rows:
        service = int(batch.service[row])
        scope = scopes.get(service)
        if scope is None:
            resource_logs = request.resource_logs.add()
            resource_logs.resource.attributes.append(KeyValue(key=SERVICE_NAME, value=_value(batch.strings[service])))
            scope = scopes[service] = resource_logs.scope_logs.add()
            scope.scope.name = SCOPE_NAME
        record = scope.log_records.add()
        record.time_unix_nano = record.observed_time_unix_nano = int(batch.time_ns[row])
        record.severity_number = int(batch.severity[row])
        record.body.string_value = batch.body[row]
        if batch.trace_id[row].any():
            record.trace_id = _id_bytes(batch.trace_id[row])
        if batch.span_id[row]:
            record.span_id = _id_bytes(batch.span_id[row : row + 1])
    return bytes(request.SerializeToString())


def encode_log_batch(batch: LogBatch, max_records: int = 4096) -> list[bytes]:
    """The batch as serialized OTLP ExportLogsServiceRequest messages of at most `max_records`
    records each, rows in order; an empty batch gives no message."""
    if max_records < 1:
        raise ValueError(f"max_records must be at least 1, got {max_records}")
    n = len(batch)
    return [_log_message(batch, range(lo, min(lo + max_records, n))) for lo in range(0, n, max_records)]
