"""Trace files for `rca analyze`: gzip or not, OTLP protobuf, OTLP/JSON or Jaeger JSON."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

from ingest.jaeger_json import decode_jaeger_json
from ingest.otlp_json import decode_otlp_json
from ingest.otlp_proto import decode_protobuf
from rca.spans import DecodeError, DecodeResult, TooLarge

GZIP_MAGIC = b"\x1f\x8b"
FILE_LIMIT = 1 << 30
OTHER_SIGNALS = ("resourceLogs", "resourceMetrics", "resourceProfiles")


def gunzip_bounded(data: bytes, limit: int) -> bytes:
    """Decompresses gzip `data`, refusing (`TooLarge`) to produce more than `limit` bytes."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise DecodeError(f"corrupt gzip body: {exc}") from exc
    if len(out) > limit:
        raise TooLarge(f"decompressed body exceeds {limit} bytes")
    if not inflater.eof:
        raise DecodeError("truncated gzip body")
    return out


def decode_bytes(data: bytes) -> DecodeResult:
    """Picks the decoder by content: OTLP/JSON, Jaeger JSON, else OTLP protobuf."""
    if data.startswith(GZIP_MAGIC):
        data = gunzip_bounded(data, FILE_LIMIT)
    head = data.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            document = json.loads(data)
        except ValueError as exc:
            raise DecodeError(f"not valid JSON: {exc}") from exc
        if isinstance(document, dict) and ("resourceSpans" in document or "resource_spans" in document):
            return decode_otlp_json(document)
        if isinstance(document, dict) and any(k in document for k in OTHER_SIGNALS):
            raise DecodeError("OTLP/JSON of logs, metrics or profiles, not traces")
        return decode_jaeger_json(document)
    return decode_protobuf(data)


def decode_file(path: Path) -> DecodeResult:
    try:
        return decode_bytes(path.read_bytes())
    except DecodeError as exc:
        raise DecodeError(f"{path}: {exc}") from exc
