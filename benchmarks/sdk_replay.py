"""Live traffic for `rca demo`: a simulated case replayed through the real OpenTelemetry SDK.

Each process gets its own `TracerProvider` (resource: service.name, service.instance.id,
host.name, NUMA node where the case has them) exporting over OTLP/gRPC, as an instrumented process
would: one per service, or per instance where the case names one (engine replicas may share a
service name). Spans keep the case's ids, parents, kinds, times, status and attributes: the
attributes come from the same encoding the trace files use (`ingest.otlp_encode`), so the SDK path
and the files agree. Log records go through a `LoggerProvider` per service in the same way, inside
the span context they name, so that they join their spans.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ingest.otlp_encode import encode_batch
from ingest.otlp_proto import STATUS_ERROR
from rca.telemetry.conventions import SERVICE_INSTANCE, SERVICE_NAME
from rca.telemetry.logs import LogBatch
from simulation import SimulatedCase

_SCOPE = "rca.simulation"
Value = str | bool | int | float
Process = tuple[str, str | None]  # (service.name, service.instance.id or None)


class _PresetIds(IdGenerator):
    """Hands the SDK the ids the case already has (set just before each `start_span`)."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id


def _value(value: AnyValue) -> Value:
    field = value.WhichOneof("value")
    result: Value = getattr(value, field) if field else ""
    return result


def _attributes(values: list[KeyValue]) -> dict[str, Value]:
    return {kv.key: _value(kv.value) for kv in values}


def _requests(case: SimulatedCase) -> Iterator[tuple[int, ExportTraceServiceRequest]]:
    """(event time of the batch's first span, request) in event-time order."""
    for batch in case.batches:
        for message in encode_batch(batch):
            yield int(batch.start_ns[0]), ExportTraceServiceRequest.FromString(message)


def _process(attributes: dict[str, Value]) -> Process:
    """The process a resource is: replicas sharing a service name are told apart by instance."""
    instance = attributes.get(SERVICE_INSTANCE)
    return str(attributes[SERVICE_NAME]), None if instance is None else str(instance)


def _resources(requests: list[tuple[int, ExportTraceServiceRequest]]) -> dict[Process, dict[str, Value]]:
    """Per process, the union of its resource attributes over the case."""
    merged: dict[Process, dict[str, Value]] = defaultdict(dict)
    for _, request in requests:
        for resource_spans in request.resource_spans:
            attributes = _attributes(list(resource_spans.resource.attributes))
            merged[_process(attributes)].update(attributes)
    return merged


def _resource(attributes: dict[str, Value]) -> Resource:
    """The SDK's resource of a process of the case. Recent SDKs make up a random
    `service.instance.id` for a process that names none: left out, so that a span has the
    instance the case gives it (none, or its replica's) and the SDK path and the files agree."""
    created = Resource.create(attributes)
    if SERVICE_INSTANCE in attributes:
        return created
    return Resource({k: v for k, v in created.attributes.items() if k != SERVICE_INSTANCE}, created.schema_url)


def replay_with_sdk(case: SimulatedCase, endpoint: str, speedup: float | None = None) -> int:
    """Sends every span of `case` to an OTLP/gRPC `endpoint` (host:port) through the SDK;
    returns the number of spans ended. `speedup` paces by event time (e.g. 10 plays a 12-minute
    case in 72 s); None sends as fast as the exporters take them."""
    ids = _PresetIds()
    providers: dict[Process, TracerProvider] = {}
    tracers: dict[Process, trace.Tracer] = {}
    queue = max(2048, case.spans)
    requests = list(_requests(case))
    for process, attributes in _resources(requests).items():
        provider = TracerProvider(resource=_resource(attributes), id_generator=ids)
        exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
        provider.add_span_processor(
            BatchSpanProcessor(exporter, max_queue_size=queue, max_export_batch_size=1024, schedule_delay_millis=200)
        )
        providers[process], tracers[process] = provider, provider.get_tracer(_SCOPE)
    began = time.monotonic()
    sent = 0
    try:
        for event_ns, request in requests:
            if speedup is not None:
                time.sleep(max(0.0, (event_ns - case.start_ns) / 1e9 / speedup - (time.monotonic() - began)))
            for resource_spans in request.resource_spans:
                tracer = tracers[_process(_attributes(list(resource_spans.resource.attributes)))]
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        _emit(tracer, ids, span)
                        sent += 1
    finally:
        for provider in providers.values():
            provider.shutdown()
    return sent


def _emit(tracer: trace.Tracer, ids: _PresetIds, span: Span) -> None:
    trace_id = int.from_bytes(span.trace_id, "big")
    context = None
    if span.parent_span_id:
        parent = SpanContext(
            trace_id, int.from_bytes(span.parent_span_id, "big"), is_remote=True, trace_flags=TraceFlags(1)
        )
        context = trace.set_span_in_context(NonRecordingSpan(parent))
    ids.trace_id, ids.span_id = trace_id, int.from_bytes(span.span_id, "big")
    sdk_span = tracer.start_span(
        span.name,
        context=context,
        kind=SpanKind(max(span.kind - 1, 0)),
        attributes=_attributes(list(span.attributes)),
        start_time=span.start_time_unix_nano,
    )
    if span.status.code == STATUS_ERROR:
        sdk_span.set_status(Status(StatusCode.ERROR))
    sdk_span.end(end_time=span.end_time_unix_nano)


def _span_context(batch: LogBatch, row: int) -> Context | None:
    """The context of the span a record names, None where it names none."""
    if not batch.span_id[row]:
        return None
    high, low = (int(word) for word in batch.trace_id[row])
    span = SpanContext((high << 64) | low, int(batch.span_id[row]), is_remote=True, trace_flags=TraceFlags(1))
    return trace.set_span_in_context(NonRecordingSpan(span))


def replay_logs_with_sdk(case: SimulatedCase, endpoint: str) -> int:
    """Sends every log record of `case` to an OTLP/gRPC `endpoint` (host:port) through the SDK's
    log exporter, one `LoggerProvider` per service (resource: service.name); returns the number
    of records emitted. Send the spans first: records join the spans already there."""
    queue = max(2048, case.log_records)
    providers: dict[str, LoggerProvider] = {}
    sent = 0
    try:
        for batch in case.logs:
            for row, service in enumerate(batch.service.tolist()):
                name = batch.strings[service]
                provider = providers.get(name)
                if provider is None:
                    provider = providers[name] = LoggerProvider(resource=Resource.create({"service.name": name}))
                    exporter = OTLPLogExporter(endpoint=endpoint, insecure=True)
                    provider.add_log_record_processor(
                        BatchLogRecordProcessor(exporter, max_queue_size=queue, schedule_delay_millis=200)
                    )
                severity = int(batch.severity[row])
                provider.get_logger(_SCOPE).emit(
                    timestamp=int(batch.time_ns[row]),
                    observed_timestamp=int(batch.time_ns[row]),
                    context=_span_context(batch, row),
                    severity_number=SeverityNumber(severity) if severity else None,
                    body=batch.body[row],
                )
                sent += 1
    finally:
        for provider in providers.values():
            provider.shutdown()
    return sent
