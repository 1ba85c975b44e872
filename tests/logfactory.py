"""Small helpers that build OTLP log export requests by hand for tests."""

from __future__ import annotations

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from tests.spanfactory import T0


def record(body: str, trace_id: bytes = b"", span_id: bytes = b"", time: int = T0) -> LogRecord:
    """An INFO record at `time` (0: none)."""
    return LogRecord(time_unix_nano=time, severity_number=9, body={"string_value": body}, trace_id=trace_id,
                     span_id=span_id)  # fmt: skip


def logs_request(service: str, records: list[LogRecord]) -> bytes:
    """A serialized export request of `records` from `service`."""
    message = ExportLogsServiceRequest()
    resource_logs = message.resource_logs.add()
    kv = resource_logs.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", service
    resource_logs.scope_logs.add().log_records.extend(records)
    return message.SerializeToString()
