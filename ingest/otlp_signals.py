"""The OTLP signals rca receives, each told by what differs between them: its gRPC service and
HTTP path, its decoders, how the sink takes it and its Export response. Both receivers serve every
signal through one code path (`grpc_receiver`, `http_receiver`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ingest.otlp_json import decode_otlp_json
from ingest.otlp_logs import decode_logs_protobuf
from ingest.otlp_logs_json import decode_logs_json
from ingest.otlp_metrics import decode_metrics_protobuf
from ingest.otlp_metrics_json import decode_metrics_json
from ingest.otlp_proto import decode_protobuf
from rca.graph.sink import ExportOutcome, SpanSink
from rca.telemetry.logs import LogDecodeResult
from rca.telemetry.metrics import MetricDecodeResult
from rca.telemetry.spans import DecodeResult

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
D = TypeVar("D", DecodeResult, LogDecodeResult, MetricDecodeResult)


@dataclass(frozen=True)
class OtlpSignal(Generic[D]):
    """One OTLP signal: `decoders` by content type, `export` hands a decoded request to the sink,
    `response` is the Export response type whose `partial_success.<rejected_field>` counts the
    records refused one by one."""

    grpc_service: str
    http_path: str
    decoders: Mapping[str, Callable[[bytes], D]]
    export: Callable[[SpanSink, D], ExportOutcome]
    response: type[Message]
    rejected_field: str

    def answer(self, outcome: ExportOutcome) -> Message:
        """The Export response: empty, or a partial success naming the records refused and why."""
        response = self.response()
        if outcome.rejected:
            partial = response.partial_success
            setattr(partial, self.rejected_field, outcome.rejected)
            partial.error_message = outcome.message
        return response

    def ingest(self, sink: SpanSink, content_type: str, body: bytes) -> ExportOutcome:
        """Decodes `body` with the decoder of `content_type` and hands it to `sink`; raises
        `DecodeError` (nothing kept) or `Overloaded` (the client should retry)."""
        return self.export(sink, self.decoders[content_type](body))


TRACES = OtlpSignal[DecodeResult](
    grpc_service="opentelemetry.proto.collector.trace.v1.TraceService",
    http_path="/v1/traces",
    decoders={PROTOBUF: decode_protobuf, JSON: decode_otlp_json},
    export=SpanSink.export,
    response=ExportTraceServiceResponse,
    rejected_field="rejected_spans",
)
LOGS = OtlpSignal[LogDecodeResult](
    grpc_service="opentelemetry.proto.collector.logs.v1.LogsService",
    http_path="/v1/logs",
    decoders={PROTOBUF: decode_logs_protobuf, JSON: decode_logs_json},
    export=SpanSink.export_logs,
    response=ExportLogsServiceResponse,
    rejected_field="rejected_log_records",
)
METRICS = OtlpSignal[MetricDecodeResult](
    grpc_service="opentelemetry.proto.collector.metrics.v1.MetricsService",
    http_path="/v1/metrics",
    decoders={PROTOBUF: decode_metrics_protobuf, JSON: decode_metrics_json},
    export=SpanSink.export_metrics,
    response=ExportMetricsServiceResponse,
    rejected_field="rejected_data_points",
)
AnySignal = OtlpSignal[DecodeResult] | OtlpSignal[LogDecodeResult] | OtlpSignal[MetricDecodeResult]
SIGNALS: tuple[AnySignal, ...] = (TRACES, LOGS, METRICS)
