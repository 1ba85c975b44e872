"""A simulated case on disk (`rca simulate`): OTLP protobuf and OTLP/JSON traces and logs, the
webhook bodies, when each is sent, and `truth.json`.

    traces.pb | traces-0001.pb ...     ExportTraceServiceRequest (one per file)
    traces.json | traces-0001.json ... the same spans as OTLP/JSON (hex ids, integer enums)
    logs.pb | logs-0001.pb ...         ExportLogsServiceRequest (one per file)
    logs.json | logs-0001.json ...     the same log records as OTLP/JSON
    metrics.pb | metrics-0001.pb ...   ExportMetricsServiceRequest (one per file; the real-deployment style only)
    metrics.json | metrics-0001.json   the same data points as OTLP/JSON
    webhooks/0001.json ...             Alertmanager v4 bodies, in send order
    schedule.json                      event time each webhook is sent at, and the traffic span
    truth.json                         the injected fault
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue

from ingest.otlp_encode import encode_batch, encode_log_batch
from ingest.otlp_encode_metrics import encode_metric_batch
from rca.telemetry.alerts import format_rfc3339
from rca.telemetry.conventions import PRIORITY_HEADER
from simulation import SimulatedCase
from simulation.attributes import SpanAttributes

SPANS_PER_FILE = 250_000
RECORDS_PER_FILE = 250_000
METRICS_PER_FILE = 250_000  # metrics (a name on a resource, with its points)
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
_TOKEN_COUNTS = ("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens")
# (resource, scope, item) keys of OTLP/JSON traces and logs
_ITEMS = (("resourceSpans", "scopeSpans", "spans"), ("resourceLogs", "scopeLogs", "logRecords"))
# a request type and its resource, scope and item fields
_Kind = tuple[type[Message], str, str, str]
_TRACES: _Kind = (ExportTraceServiceRequest, "resource_spans", "scope_spans", "spans")
_LOGS: _Kind = (ExportLogsServiceRequest, "resource_logs", "scope_logs", "log_records")
_METRICS: _Kind = (ExportMetricsServiceRequest, "resource_metrics", "scope_metrics", "metrics")


def otlp_json(message: Message) -> dict[str, Any]:
    """OTLP/JSON of a trace or logs request: lowerCamelCase, integer enums, int64 as strings, hex ids."""
    document: dict[str, Any] = MessageToDict(message, use_integers_for_enums=True)
    for resources, scopes, items in _ITEMS:
        for resource in document.get(resources, ()):
            for scope in resource.get(scopes, ()):
                for item in scope.get(items, ()):
                    for key in _ID_FIELDS:
                        if key in item:
                            item[key] = base64.b64decode(item[key]).hex()
    return document


def _merged(chunks: Iterable[bytes], kind: _Kind, per_file: int) -> list[Message]:
    """Serialized requests of one kind merged into requests of at most `per_file` spans,
    records or metrics each (protobuf messages concatenate)."""
    request, resources, scopes, items = kind
    parts: list[Message] = []
    count = per_file
    for chunk in chunks:
        if count >= per_file:
            parts.append(request())
            count = 0
        message = request.FromString(chunk)
        getattr(parts[-1], resources).extend(getattr(message, resources))
        count += sum(len(getattr(s, items)) for r in getattr(message, resources) for s in getattr(r, scopes))
    return parts


def _write_parts(parts: list[Message], stem: str, out: Path) -> list[Path]:
    """`{stem}.pb` and `{stem}.json`, or numbered `{stem}-0001.pb`... where there are several."""
    written: list[Path] = []
    for i, message in enumerate(parts, 1):
        name = stem if len(parts) == 1 else f"{stem}-{i:04d}"
        written.append(out / f"{name}.pb")
        written[-1].write_bytes(message.SerializeToString())
        written.append(out / f"{name}.json")
        written[-1].write_text(json.dumps(otlp_json(message), separators=(",", ":")))
    return written


def _any(value: str | int | float | tuple[str, ...]) -> AnyValue:
    if isinstance(value, tuple):
        return AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=v) for v in value]))
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(string_value=value) if isinstance(value, str) else AnyValue(int_value=value)


def _with_attributes(chunk: bytes, attributes: SpanAttributes) -> bytes:
    """An encoded trace request with what the case's spans also carry: NCCL communicators and
    ranks or vLLM's request attributes, and its deployment's spelling of token counts (whole
    numbers where vLLM writes them) and urgency."""
    request = ExportTraceServiceRequest.FromString(chunk)
    for resource_spans in request.resource_spans:
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                for kv in span.attributes:
                    key = attributes.spelling(kv.key)
                    if key == PRIORITY_HEADER and kv.key != key:
                        kv.value.CopyFrom(_any(attributes.header(kv.value.int_value)))
                    kv.key = key
                    if attributes.requests is not None and key in _TOKEN_COUNTS:
                        kv.value.CopyFrom(_any(round(kv.value.double_value)))
                extra = attributes.extra(int.from_bytes(span.span_id, "big"))
                span.attributes.extend(KeyValue(key=k, value=_any(v)) for k, v in extra.items())
    return bytes(request.SerializeToString())


def truth_json(case: SimulatedCase) -> dict[str, Any]:
    """`Truth` with the same field names (times in epoch ns), plus the times as RFC3339
    (`inject`, `end`)."""
    truth = asdict(case.truth)
    truth["alert_services"] = list(case.truth.alert_services)
    truth["inject"] = format_rfc3339(case.truth.inject_ns)
    truth["end"] = format_rfc3339(case.truth.end_ns)
    return truth


def write_case(case: SimulatedCase, out: Path) -> list[Path]:
    """Writes every file of the case under `out` (created); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "webhooks").mkdir(exist_ok=True)
    spans = (_with_attributes(chunk, case.attributes) for batch in case.batches for chunk in encode_batch(batch))
    written = _write_parts(_merged(spans, _TRACES, SPANS_PER_FILE), "traces", out)
    records = (chunk for batch in case.logs for chunk in encode_log_batch(batch))
    written += _write_parts(_merged(records, _LOGS, RECORDS_PER_FILE), "logs", out)
    points = (chunk for batch in case.metrics for chunk in encode_metric_batch(batch))
    written += _write_parts(_merged(points, _METRICS, METRICS_PER_FILE), "metrics", out)
    schedule = []
    for i, (body, sent) in enumerate(zip(case.webhooks, case.webhook_times_ns, strict=True), 1):
        path = out / "webhooks" / f"{i:04d}.json"
        path.write_text(json.dumps(body, indent=2) + "\n")
        written.append(path)
        schedule.append({"file": f"webhooks/{path.name}", "sent_at": format_rfc3339(sent)})
    documents = {
        "schedule.json": {
            "traffic": {"start": format_rfc3339(case.start_ns), "end": format_rfc3339(case.end_ns)},
            "webhooks": schedule,
        },
        "truth.json": truth_json(case),
    }
    for name, document in documents.items():
        (out / name).write_text(json.dumps(document, indent=2) + "\n")
        written.append(out / name)
    return written
