"""Trace, log and metric files for `rca analyze`: gzip or not; traces as OTLP protobuf, OTLP/JSON
or Jaeger JSON, logs and metrics as OTLP protobuf or OTLP/JSON."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ingest.jaeger_json import decode_jaeger_document
from ingest.otlp_json import decode_document, load_json
from ingest.otlp_logs import decode_logs_protobuf
from ingest.otlp_logs_json import decode_logs_document
from ingest.otlp_metrics import decode_metrics_protobuf
from ingest.otlp_metrics_json import decode_metrics_document
from ingest.otlp_proto import decode_protobuf
from rca.telemetry.logs import LogDecodeResult
from rca.telemetry.metrics import MetricDecodeResult
from rca.telemetry.spans import DecodeError, DecodeResult, TooLarge

GZIP_MAGIC = b"\x1f\x8b"
FILE_LIMIT = 1 << 30  # decompressed bytes
OTLP_KEYS = ("resourceSpans", "resource_spans")
JAEGER_KEYS = ("data", "spans", "traceID")
OTHER_SIGNALS = ("resourceLogs", "resourceMetrics", "resourceProfiles")
LOG_KEYS = ("resourceLogs", "resource_logs")
METRIC_KEYS = ("resourceMetrics", "resource_metrics")
R = TypeVar("R", DecodeResult, LogDecodeResult, MetricDecodeResult)


def gunzip_bounded(data: bytes, limit: int) -> bytes:
    """Decompresses gzip `data` (every member), refusing (`TooLarge`) to produce more than
    `limit` bytes and raising `DecodeError` for corrupt or truncated input."""
    out = bytearray()
    rest = data
    while True:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as exc:
            raise DecodeError(f"corrupt gzip data: {exc}") from None
        if len(out) > limit:
            raise TooLarge(f"decompressed data exceeds {limit} bytes")
        if not inflater.eof:
            raise DecodeError("truncated gzip data")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)


def _decode_json(data: bytes) -> DecodeResult:
    document = load_json(data, "JSON")
    if isinstance(document, dict) and any(key in document for key in OTLP_KEYS):
        return decode_document(document)
    if isinstance(document, dict) and any(key in document for key in OTHER_SIGNALS):
        raise DecodeError("OTLP/JSON of logs, metrics or profiles, not traces")
    if isinstance(document, list) or (isinstance(document, dict) and any(key in document for key in JAEGER_KEYS)):
        return decode_jaeger_document(document)
    raise DecodeError("JSON is neither OTLP/JSON (resourceSpans) nor Jaeger JSON (data, spans, traceID)")


def _decode_log_json(data: bytes) -> LogDecodeResult:
    document = load_json(data, "JSON")
    if isinstance(document, dict) and any(key in document for key in OTLP_KEYS):
        raise DecodeError("OTLP/JSON of traces (resourceSpans), not logs")
    if not isinstance(document, dict) or not any(key in document for key in LOG_KEYS):
        raise DecodeError("JSON is not OTLP/JSON logs (resourceLogs)")
    return decode_logs_document(document)


def _decode_metric_json(data: bytes) -> MetricDecodeResult:
    document = load_json(data, "JSON")
    if isinstance(document, dict) and any(key in document for key in OTLP_KEYS + LOG_KEYS):
        raise DecodeError("OTLP/JSON of traces or logs (resourceSpans, resourceLogs), not metrics")
    if not isinstance(document, dict) or not any(key in document for key in METRIC_KEYS):
        raise DecodeError("JSON is not OTLP/JSON metrics (resourceMetrics)")
    return decode_metrics_document(document)


def _by_content(data: bytes, from_json: Callable[[bytes], R], from_protobuf: Callable[[bytes], R]) -> R:
    if data.startswith(GZIP_MAGIC):
        data = gunzip_bounded(data, FILE_LIMIT)
    if data.lstrip()[:1] in (b"{", b"["):
        return from_json(data)
    return from_protobuf(data)


def decode_bytes(data: bytes) -> DecodeResult:
    """Picks the decoder by content: gunzips first, then OTLP/JSON or Jaeger JSON when the bytes
    are a JSON object or list, else OTLP protobuf."""
    return _by_content(data, _decode_json, decode_protobuf)


def decode_log_bytes(data: bytes) -> LogDecodeResult:
    """Log records by content: gunzips first, then OTLP/JSON when the bytes are a JSON object or
    list, else OTLP protobuf (`ExportLogsServiceRequest`)."""
    return _by_content(data, _decode_log_json, decode_logs_protobuf)


def decode_metric_bytes(data: bytes) -> MetricDecodeResult:
    """Metric data points by content: gunzips first, then OTLP/JSON when the bytes are a JSON
    object or list, else OTLP protobuf (`ExportMetricsServiceRequest`)."""
    return _by_content(data, _decode_metric_json, decode_metrics_protobuf)


def _read(path: Path, decode: Callable[[bytes], R]) -> R:
    try:
        return decode(path.read_bytes())
    except DecodeError as exc:
        raise type(exc)(f"{path}: {exc}") from exc


def decode_file(path: Path) -> DecodeResult:
    """The spans of one trace file; `DecodeError` messages start with the path."""
    return _read(path, decode_bytes)


def decode_log_file(path: Path) -> LogDecodeResult:
    """The log records of one log file; `DecodeError` messages start with the path."""
    return _read(path, decode_log_bytes)


def decode_metric_file(path: Path) -> MetricDecodeResult:
    """The data points of one metric file; `DecodeError` messages start with the path."""
    return _read(path, decode_metric_bytes)
