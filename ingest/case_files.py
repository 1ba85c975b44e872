"""A simulated case on disk (`rca simulate`): OTLP protobuf and OTLP/JSON traces, the webhook
bodies, when each is sent, and `truth.json`.

    traces.pb | traces-0001.pb ...     ExportTraceServiceRequest (one per file)
    traces.json | traces-0001.json ... the same spans as OTLP/JSON (hex ids, integer enums)
    webhooks/0001.json ...             Alertmanager v4 bodies, in send order
    schedule.json                      event time each webhook is sent at, and the traffic span
    truth.json                         the injected fault
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.otlp_encode import encode_batch
from rca.alerts import format_rfc3339
from rca.simulation import SimulatedCase

SPANS_PER_FILE = 250_000
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def otlp_json(message: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON of a request: lowerCamelCase, integer enums, int64 as strings, hex ids."""
    document: dict[str, Any] = MessageToDict(message, use_integers_for_enums=True)
    for resource in document.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            for span in scope.get("spans", ()):
                for key in _ID_FIELDS:
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return document


def _trace_parts(case: SimulatedCase) -> list[ExportTraceServiceRequest]:
    """The spans as requests of at most `SPANS_PER_FILE` spans (protobuf messages concatenate)."""
    parts: list[ExportTraceServiceRequest] = []
    count = SPANS_PER_FILE
    for batch in case.batches:
        for chunk in encode_batch(batch):
            if count >= SPANS_PER_FILE:
                parts.append(ExportTraceServiceRequest())
                count = 0
            message = ExportTraceServiceRequest.FromString(chunk)
            parts[-1].resource_spans.extend(message.resource_spans)
            count += sum(len(s.spans) for r in message.resource_spans for s in r.scope_spans)
    return parts


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
    parts = _trace_parts(case)
    written: list[Path] = []
    for i, message in enumerate(parts, 1):
        stem = "traces" if len(parts) == 1 else f"traces-{i:04d}"
        written.append(out / f"{stem}.pb")
        written[-1].write_bytes(message.SerializeToString())
        written.append(out / f"{stem}.json")
        written[-1].write_text(json.dumps(otlp_json(message), separators=(",", ":")))
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
