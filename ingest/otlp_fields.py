"""Protobuf field numbers of the OTLP messages read byte by byte: by the span scanner
(`ingest.otlp_scan`) and by the soak client patching its requests (`benchmarks.soak`). Named
once, as opentelemetry-proto numbers them (`tests/test_otlp_fields.py` checks them against the
generated descriptors)."""

from __future__ import annotations

# Export requests: ExportTraceServiceRequest.resource_spans, ExportLogsServiceRequest.resource_logs
REQUEST_RESOURCES = 1
# ResourceSpans / ResourceLogs
RESOURCE = 1
RESOURCE_SCOPES = 2  # scope_spans / scope_logs
# ScopeSpans.spans / ScopeLogs.log_records
SCOPE_RECORDS = 2
# Span
SPAN_TRACE_ID = 1
SPAN_SPAN_ID = 2
SPAN_TRACE_STATE = 3
SPAN_PARENT_SPAN_ID = 4
SPAN_NAME = 5
SPAN_KIND = 6
SPAN_START_TIME = 7
SPAN_END_TIME = 8
SPAN_ATTRIBUTES = 9
SPAN_STATUS = 15
# Status
STATUS_CODE = 3
# KeyValue
KEY_VALUE_KEY = 1
# LogRecord
LOG_TIME = 1
LOG_OBSERVED_TIME = 11
LOG_TRACE_ID = 9
LOG_SPAN_ID = 10
