"""Protobuf field numbers of the OTLP messages read byte by byte: by the wire scanners
(`ingest.otlp_wire`, `ingest.otlp_scan`, `ingest.otlp_metrics_scan`) and by the soak client
patching its requests (`benchmarks.soak`). Named once, as opentelemetry-proto numbers them
(`tests/test_otlp_fields.py` checks them against the generated descriptors)."""

from __future__ import annotations

# Export requests: resource_spans, resource_logs, resource_metrics
REQUEST_RESOURCES = 1
# ResourceSpans / ResourceLogs / ResourceMetrics
RESOURCE = 1
RESOURCE_SCOPES = 2  # scope_spans / scope_logs / scope_metrics
# ScopeSpans.spans / ScopeLogs.log_records / ScopeMetrics.metrics
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
# Metric: its `data` oneof
METRIC_GAUGE = 5
METRIC_SUM = 7
METRIC_HISTOGRAM = 9
METRIC_EXPONENTIAL_HISTOGRAM = 10
METRIC_SUMMARY = 11
# Gauge.data_points / Sum.data_points
NUMBERS_POINTS = 1
# NumberDataPoint
NUMBER_START_TIME = 2
NUMBER_TIME = 3
NUMBER_AS_DOUBLE = 4
NUMBER_AS_INT = 6
NUMBER_ATTRIBUTES = 7
NUMBER_FLAGS = 8
