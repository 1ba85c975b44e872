"""OTLP/HTTP `POST /v1/traces` as a small Starlette app: transport only, decoders do the rest."""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable

from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ingest.files import gunzip_bounded
from ingest.otlp_json import decode_otlp_json
from ingest.otlp_proto import decode_protobuf
from rca.ingestion import Overloaded
from rca.receiving import ExportOutcome, SpanSink
from rca.spans import DecodeError, DecodeResult, TooLarge

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
DECODERS: dict[str, Callable[[bytes], DecodeResult]] = {PROTOBUF: decode_protobuf, JSON: decode_otlp_json}


class _TooLarge(Exception):
    pass


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _answer(kind: str, status: int, message: str = "", outcome: ExportOutcome | None = None) -> Response:
    """An OTLP response: ExportTraceServiceResponse on success, google.rpc.Status on failure."""
    if status == 200:
        rejected = outcome.rejected if outcome else 0
        if kind == JSON:
            body: dict[str, object] = {}
            if rejected:
                body["partialSuccess"] = {
                    "rejectedSpans": str(rejected),
                    "errorMessage": outcome.message if outcome else "",
                }
            return Response(json.dumps(body), 200, media_type=JSON)
        response = ExportTraceServiceResponse()
        if rejected and outcome:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = outcome.message
        return Response(response.SerializeToString(), 200, media_type=PROTOBUF)
    if kind == JSON:
        return Response(json.dumps({"code": status, "message": message}), status, media_type=JSON)
    return Response(status_pb2.Status(message=message).SerializeToString(), status, media_type=PROTOBUF)


def otlp_http_app(sink: SpanSink, *, max_message_bytes: int, api_token: str | None) -> Starlette:
    """The OTLP/HTTP receiver; `max_message_bytes` bounds the body before and after gzip."""
    expected = f"Bearer {api_token}".encode() if api_token else None

    def decode_and_export(decoder: Callable[[bytes], DecodeResult], body: bytes, gzipped: bool) -> ExportOutcome:
        with sink.admit():
            if gzipped:
                body = gunzip_bounded(body, max_message_bytes)
            return sink.export(decoder(body))

    async def traces(request: Request) -> Response:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        decoder = DECODERS.get(kind)
        if decoder is None:
            sink.refuse("unsupported_media_type")
            return Response(f"unsupported content type {kind!r}: use {PROTOBUF} or {JSON}\n", 415)
        given = request.headers.get("authorization", "").encode()
        if expected is not None and not hmac.compare_digest(given, expected):
            sink.refuse("unauthenticated")
            return _answer(kind, 401, "missing or wrong bearer token")
        encoding = request.headers.get("content-encoding", "identity").lower()
        if encoding not in ("gzip", "identity"):
            sink.refuse("unsupported_encoding")
            return _answer(kind, 415, f"unsupported content encoding {encoding!r}")
        try:
            body = await _read_body(request, max_message_bytes)
            outcome = await run_in_threadpool(decode_and_export, decoder, body, encoding == "gzip")
        except _TooLarge:
            sink.refuse("oversize")
            return _answer(kind, 413, f"request exceeds {max_message_bytes} bytes")
        except DecodeError as exc:
            reason = "oversize" if isinstance(exc, TooLarge) else "malformed"
            sink.refuse(reason)
            return _answer(kind, 413 if reason == "oversize" else 400, str(exc))
        except Overloaded as exc:
            response = _answer(kind, 503, str(exc))
            response.headers["Retry-After"] = str(exc.retry_after)
            return response
        return _answer(kind, 200, outcome=outcome)

    return Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])
