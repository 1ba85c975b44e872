"""OTLP/HTTP `POST /v1/traces`, `POST /v1/logs` and `POST /v1/metrics` as a small Starlette app:
transport only, the decoders come with each signal (`otlp_signals`)."""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable

from google.protobuf.json_format import MessageToJson
from google.rpc import status_pb2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ingest.files import gunzip_bounded
from ingest.otlp_signals import JSON, PROTOBUF, SIGNALS, AnySignal
from rca.graph.sink import ExportOutcome, SpanSink
from rca.graph.writer import Overloaded
from rca.telemetry.spans import DecodeError, TooLarge


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


def _failure(kind: str, status: int, message: str) -> Response:
    """An OTLP failure: google.rpc.Status, in the request's encoding."""
    if kind == JSON:
        return Response(json.dumps({"code": status, "message": message}), status, media_type=JSON)
    return Response(status_pb2.Status(message=message).SerializeToString(), status, media_type=PROTOBUF)


def _success(signal: AnySignal, kind: str, outcome: ExportOutcome) -> Response:
    """The signal's Export response in the request's encoding (OTLP/JSON: camelCase, int64 as strings)."""
    answer = signal.answer(outcome)
    if kind == JSON:
        return Response(MessageToJson(answer, indent=None), 200, media_type=JSON)
    return Response(answer.SerializeToString(), 200, media_type=PROTOBUF)


def otlp_http_app(sink: SpanSink, *, max_message_bytes: int, api_token: str | None) -> Starlette:
    """The OTLP/HTTP receiver, a route per signal; `max_message_bytes` bounds the body before and after gzip."""
    expected = f"Bearer {api_token}".encode() if api_token else None

    def decode_and_export(signal: AnySignal, kind: str, body: bytes, gzipped: bool) -> ExportOutcome:
        with sink.admit():
            if gzipped:
                body = gunzip_bounded(body, max_message_bytes)
            return signal.ingest(sink, kind, body)

    def route(signal: AnySignal) -> Callable[[Request], Awaitable[Response]]:
        async def export(request: Request) -> Response:
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind not in signal.decoders:
                sink.refuse("unsupported_media_type")
                return Response(f"unsupported content type {kind!r}: use {PROTOBUF} or {JSON}\n", 415)
            given = request.headers.get("authorization", "").encode()
            if expected is not None and not hmac.compare_digest(given, expected):
                sink.refuse("unauthenticated")
                return _failure(kind, 401, "missing or wrong bearer token")
            encoding = request.headers.get("content-encoding", "identity").lower()
            if encoding not in ("gzip", "identity"):
                sink.refuse("unsupported_encoding")
                return _failure(kind, 415, f"unsupported content encoding {encoding!r}")
            try:
                body = await _read_body(request, max_message_bytes)
                outcome = await run_in_threadpool(decode_and_export, signal, kind, body, encoding == "gzip")
            except _TooLarge:
                sink.refuse("oversize")
                return _failure(kind, 413, f"request exceeds {max_message_bytes} bytes")
            except DecodeError as exc:
                reason = "oversize" if isinstance(exc, TooLarge) else "malformed"
                sink.refuse(reason)
                return _failure(kind, 413 if reason == "oversize" else 400, str(exc))
            except Overloaded as exc:
                response = _failure(kind, 503, str(exc))
                response.headers["Retry-After"] = str(exc.retry_after)
                return response
            return _success(signal, kind, outcome)

        return export

    return Starlette(routes=[Route(s.http_path, route(s), methods=["POST"]) for s in SIGNALS])
