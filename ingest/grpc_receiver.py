"""OTLP/gRPC `TraceService/Export`, `LogsService/Export` and `MetricsService/Export` over grpcio: transport only, the
decoders come with each signal (`otlp_signals`)."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Sequence
from concurrent import futures
from dataclasses import dataclass
from functools import partial

import grpc
from google.protobuf import duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from ingest.otlp_signals import PROTOBUF, SIGNALS, AnySignal
from rca.graph.sink import SpanSink
from rca.graph.writer import Overloaded
from rca.telemetry.spans import DecodeError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Status(grpc.Status):  # type: ignore[misc]
    code: grpc.StatusCode
    details: str
    trailing_metadata: Sequence[tuple[str, bytes | str]]


def unavailable_status(retry_after_s: int, message: str) -> grpc.Status:
    """UNAVAILABLE with RetryInfo both as the rich status detail and the legacy trailer."""
    retry = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=retry_after_s))
    status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message=message)
    status.details.add().Pack(retry)
    return _Status(
        grpc.StatusCode.UNAVAILABLE,
        message,
        (
            ("grpc-status-details-bin", status.SerializeToString()),
            ("google.rpc.retryinfo-bin", retry.SerializeToString()),
        ),
    )


class ExportHandler:
    """Decodes, checks auth, queues; maps failures to OTLP's status codes. One for every signal."""

    def __init__(self, sink: SpanSink, *, api_token: str | None) -> None:
        self.sink = sink
        self._expected = f"Bearer {api_token}".encode() if api_token else None

    def _authorized(self, context: grpc.ServicerContext) -> bool:
        if self._expected is None:
            return True
        given = dict(context.invocation_metadata()).get("authorization", "")
        return hmac.compare_digest(str(given).encode(), self._expected)

    def export(self, signal: AnySignal, request: bytes, context: grpc.ServicerContext) -> bytes:
        """`signal`'s Export: its response, or an abort with the status that says why not."""
        if not self._authorized(context):
            self.sink.refuse("unauthenticated")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        try:
            with self.sink.admit():
                outcome = signal.ingest(self.sink, PROTOBUF, request)
        except DecodeError as exc:
            self.sink.refuse("malformed")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except Overloaded as exc:
            context.abort_with_status(unavailable_status(exc.retry_after, str(exc)))
        body: bytes = signal.answer(outcome).SerializeToString()
        return body


def start_grpc_server(
    handler: ExportHandler, address: str, *, max_message_bytes: int, workers: int = 8
) -> tuple[grpc.Server, int]:
    """Starts the server for every OTLP signal on `address` (port 0: any free port); returns it
    and the bound port."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rca-otlp-grpc"),
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", 4 * 1024 * 1024),
        ],
    )
    services = [
        grpc.method_handlers_generic_handler(
            s.grpc_service, {"Export": grpc.unary_unary_rpc_method_handler(partial(handler.export, s))}
        )
        for s in SIGNALS
    ]
    server.add_generic_rpc_handlers(services)
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen for OTLP/gRPC on {address}")
    server.start()
    return server, port
