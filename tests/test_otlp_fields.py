"""The field numbers the byte-level readers use are opentelemetry-proto's own."""

from __future__ import annotations

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from ingest import otlp_fields as f


def _number(message: type, name: str) -> int:
    return int(message.DESCRIPTOR.fields_by_name[name].number)


def test_every_named_field_number_is_the_schemas() -> None:
    expected = {
        f.REQUEST_RESOURCES: [
            (ExportTraceServiceRequest, "resource_spans"),
            (ExportLogsServiceRequest, "resource_logs"),
            (ExportMetricsServiceRequest, "resource_metrics"),
        ],
        f.RESOURCE: [(ResourceSpans, "resource"), (ResourceLogs, "resource"), (ResourceMetrics, "resource")],
        f.RESOURCE_SCOPES: [
            (ResourceSpans, "scope_spans"),
            (ResourceLogs, "scope_logs"),
            (ResourceMetrics, "scope_metrics"),
        ],
        f.SCOPE_RECORDS: [(ScopeSpans, "spans"), (ScopeLogs, "log_records"), (ScopeMetrics, "metrics")],
        f.SPAN_TRACE_ID: [(Span, "trace_id")],
        f.SPAN_SPAN_ID: [(Span, "span_id")],
        f.SPAN_TRACE_STATE: [(Span, "trace_state")],
        f.SPAN_PARENT_SPAN_ID: [(Span, "parent_span_id")],
        f.SPAN_NAME: [(Span, "name")],
        f.SPAN_KIND: [(Span, "kind")],
        f.SPAN_START_TIME: [(Span, "start_time_unix_nano")],
        f.SPAN_END_TIME: [(Span, "end_time_unix_nano")],
        f.SPAN_ATTRIBUTES: [(Span, "attributes")],
        f.SPAN_STATUS: [(Span, "status")],
        f.STATUS_CODE: [(Status, "code")],
        f.KEY_VALUE_KEY: [(KeyValue, "key")],
        f.LOG_TIME: [(LogRecord, "time_unix_nano")],
        f.LOG_OBSERVED_TIME: [(LogRecord, "observed_time_unix_nano")],
        f.LOG_TRACE_ID: [(LogRecord, "trace_id")],
        f.LOG_SPAN_ID: [(LogRecord, "span_id")],
        f.METRIC_GAUGE: [(Metric, "gauge")],
        f.METRIC_SUM: [(Metric, "sum")],
        f.METRIC_HISTOGRAM: [(Metric, "histogram")],
        f.METRIC_EXPONENTIAL_HISTOGRAM: [(Metric, "exponential_histogram")],
        f.METRIC_SUMMARY: [(Metric, "summary")],
        f.NUMBERS_POINTS: [(Gauge, "data_points"), (Sum, "data_points")],
        f.NUMBER_START_TIME: [(NumberDataPoint, "start_time_unix_nano")],
        f.NUMBER_TIME: [(NumberDataPoint, "time_unix_nano")],
        f.NUMBER_AS_DOUBLE: [(NumberDataPoint, "as_double")],
        f.NUMBER_AS_INT: [(NumberDataPoint, "as_int")],
        f.NUMBER_ATTRIBUTES: [(NumberDataPoint, "attributes")],
        f.NUMBER_FLAGS: [(NumberDataPoint, "flags")],
    }
    for number, fields in expected.items():
        for message, name in fields:
            assert _number(message, name) == number, (message.__name__, name)


def test_the_oneof_fields_named_are_the_whole_oneofs() -> None:
    data = Metric.DESCRIPTOR.oneofs_by_name["data"]
    named = {f.METRIC_GAUGE, f.METRIC_SUM, f.METRIC_HISTOGRAM, f.METRIC_EXPONENTIAL_HISTOGRAM, f.METRIC_SUMMARY}
    assert {field.number for field in data.fields} == named
    value = NumberDataPoint.DESCRIPTOR.oneofs_by_name["value"]
    assert {field.number for field in value.fields} == {f.NUMBER_AS_DOUBLE, f.NUMBER_AS_INT}
