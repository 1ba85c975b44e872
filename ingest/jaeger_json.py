"""Jaeger JSON (the UI/v1 query format) → span records: `references`, `processes`, µs times."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rca.builder import SpanBatchBuilder
from rca.conventions import AttrValue
from rca.spans import DecodeError, DecodeResult

_KINDS = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}


def _tags(tags: Any) -> dict[str, AttrValue]:
    if not isinstance(tags, list):
        return {}
    return {t["key"]: t.get("value") for t in tags if isinstance(t, dict) and isinstance(t.get("key"), str)}


def _id(text: Any, width: int) -> bytes:
    """Hex id left-padded to `width` bytes (Jaeger drops leading zeros, 64-bit trace ids)."""
    if not isinstance(text, str) or len(text) > 2 * width:
        return b"?"
    try:
        return bytes.fromhex(text.rjust(2 * width, "0"))
    except ValueError:
        return b"?"


def _parent(span: Mapping[str, Any]) -> str:
    references = span.get("references") or []
    if not isinstance(references, list):
        raise DecodeError(f"span {span.get('spanID')!r}: references must be a list")
    for wanted in ("CHILD_OF", "FOLLOWS_FROM"):
        for ref in references:
            if isinstance(ref, dict) and ref.get("refType") == wanted:
                return str(ref.get("spanID", ""))
    return str(span.get("parentSpanID") or "")


def _add_trace(builder: SpanBatchBuilder, trace: Any, path: str) -> None:
    if not isinstance(trace, dict) or not isinstance(trace.get("spans"), list):
        raise DecodeError(f"{path} must be a trace object with a spans list")
    processes = trace.get("processes") or {}
    if not isinstance(processes, dict):
        raise DecodeError(f"{path}.processes must be an object")
    for k, span in enumerate(trace["spans"]):
        if not isinstance(span, dict):
            raise DecodeError(f"{path}.spans[{k}] must be an object")
        process = span.get("process") or processes.get(span.get("processID"), {})
        tags = _tags(span.get("tags"))
        try:
            start_us, duration_us = int(span.get("startTime", 0)), int(span.get("duration", 0))
        except (TypeError, ValueError):
            raise DecodeError(f"{path}.spans[{k}]: startTime and duration must be integers (µs)") from None
        parent = _parent(span)
        builder.add(
            _id(span.get("traceID", trace.get("traceID")), 16),
            _id(span.get("spanID"), 8),
            _id(parent, 8) if parent else b"",
            str(process.get("serviceName") or "unknown_service"),
            str(span.get("operationName", "")),
            _KINDS.get(str(tags.get("span.kind", "")).lower(), 0),
            start_us * 1000,
            (start_us + duration_us) * 1000,
            tags.get("error") in (True, "true") or tags.get("otel.status_code") == "ERROR",
            tags,
            _tags(process.get("tags")),
        )


def decode_jaeger_document(document: Any) -> DecodeResult:
    """`{"data": [trace, ...]}`, a list of traces, a list of spans, or one trace → span records."""
    if isinstance(document, dict) and "data" in document:
        traces = document["data"]
    elif isinstance(document, list) and all(isinstance(x, dict) and "spanID" in x for x in document):
        traces = [{"spans": document}]  # a bare list of spans, each with its own process
    elif isinstance(document, list):
        traces = document
    else:
        traces = [document]
    if not isinstance(traces, list):
        raise DecodeError("Jaeger JSON: data must be a list of traces")
    builder = SpanBatchBuilder()
    for i, trace in enumerate(traces):
        _add_trace(builder, trace, f"$.data[{i}]")
    return builder.build()


def decode_jaeger_json(data: bytes | str | Any) -> DecodeResult:
    """Jaeger JSON bytes (or a parsed document) → span records."""
    if isinstance(data, bytes | str):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise DecodeError(f"malformed Jaeger JSON: {exc}") from exc
    return decode_jaeger_document(data)
