"""Bad input is refused with the right code, and the server keeps serving afterwards."""

from __future__ import annotations

import gzip

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.conftest import Server
from tests.spanfactory import T0, request, sid, span

METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _grpc_export(server: Server, body: bytes, compression: grpc.Compression | None = None) -> bytes:
    with grpc.insecure_channel(server.otlp_grpc, options=[("grpc.max_send_message_length", 256 << 20)]) as channel:
        call = channel.unary_unary(METHOD)
        response: bytes = call(body, timeout=20, compression=compression)
        return response


def _http_export(
    server: Server, body: bytes, content_type: str = "application/x-protobuf", encoding: str | None = None
) -> httpx.Response:
    headers = {"content-type": content_type}
    if encoding:
        headers["content-encoding"] = encoding
    return httpx.post(f"http://{server.otlp_http}/v1/traces", content=body, headers=headers, timeout=30)


def _good() -> bytes:
    return request("svc", [span(sid(1)), span(sid(2), parent=sid(1))]).SerializeToString()


def _still_serving(server: Server) -> None:
    reply = ExportTraceServiceResponse.FromString(_grpc_export(server, _good()))
    assert reply.partial_success.rejected_spans == 0
    assert httpx.get(f"{server.api}/healthz", timeout=5).status_code == 200


def test_malformed_protobuf_is_invalid_argument_and_400(server: Server) -> None:
    with pytest.raises(grpc.RpcError) as failure:
        _grpc_export(server, b"\x0a\xff\xff\xff\xff\x0f garbage")
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "malformed" in (failure.value.details() or "")
    response = _http_export(server, b"\x0a\xff\xff garbage")
    assert response.status_code == 400
    assert "malformed" in status_pb2.Status.FromString(response.content).message
    _still_serving(server)


def test_bad_id_length_and_end_before_start_are_partial_success(server: Server) -> None:
    body = request(
        "svc",
        [
            span(sid(1)),
            span(b"\x01\x02\x03"),
            span(sid(3), start=T0 + 10, end=T0),
        ],
    ).SerializeToString()
    reply = ExportTraceServiceResponse.FromString(_grpc_export(server, body))
    assert reply.partial_success.rejected_spans == 2
    assert "span_id" in reply.partial_success.error_message
    assert "before" in reply.partial_success.error_message
    http_reply = ExportTraceServiceResponse.FromString(_http_export(server, body).content)
    assert http_reply.partial_success.rejected_spans == 2
    graph = httpx.get(f"{server.api}/graph", timeout=5).json()
    svc = next(n for n in graph["nodes"] if n["id"] == "svc")
    assert svc["detail__calls"] == 2.0  # the one valid span, once per protocol


def test_wrong_content_type_is_415(server: Server) -> None:
    response = _http_export(server, _good(), content_type="text/plain")
    assert response.status_code == 415
    assert "application/x-protobuf" in response.text
    _still_serving(server)


def test_oversize_body_is_resource_exhausted_and_413(server: Server) -> None:
    huge = b"\x00" * (65 << 20)
    with pytest.raises(grpc.RpcError) as failure:
        _grpc_export(server, huge)
    assert failure.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert _http_export(server, huge).status_code == 413
    _still_serving(server)


def test_gzip_bomb_is_refused(server: Server) -> None:
    bomb = gzip.compress(b"\x00" * (200 << 20), compresslevel=9)
    assert len(bomb) < 1 << 20
    assert _http_export(server, bomb, encoding="gzip").status_code == 413
    with pytest.raises(grpc.RpcError) as failure:
        _grpc_export(server, b"\x00" * (80 << 20), compression=grpc.Compression.Gzip)
    assert failure.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    _still_serving(server)


def test_gzip_and_json_bodies_are_accepted(server: Server) -> None:
    assert _http_export(server, gzip.compress(_good()), encoding="gzip").status_code == 200
    reply = ExportTraceServiceResponse.FromString(_grpc_export(server, _good(), grpc.Compression.Gzip))
    assert reply.partial_success.rejected_spans == 0
    body = (
        '{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"js"}}]},'
        '"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174",'
        '"name":"x","kind":2,"startTimeUnixNano":"1767000000000000000","endTimeUnixNano":"1767000000001000000"}]}]}]}'
    )
    response = _http_export(server, body.encode(), content_type="application/json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    nodes = {n["id"] for n in httpx.get(f"{server.api}/graph", timeout=5).json()["nodes"]}
    assert "js" in nodes


def test_unavailable_carries_retry_info() -> None:
    from ingest.grpc_receiver import unavailable_status

    status = unavailable_status(3, "full")
    trailers = dict(status.trailing_metadata)
    assert status.code == grpc.StatusCode.UNAVAILABLE
    rich = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    info = error_details_pb2.RetryInfo()
    assert rich.details[0].Unpack(info)
    assert info.retry_delay.seconds == 3
    assert error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"]).retry_delay.seconds == 3


def test_out_of_range_kind_and_times_are_rejected_not_crashing(server: Server) -> None:
    body = request("svc", [span(sid(1)), span(sid(2), start=2**64 - 1, end=2**64 - 1)])
    body.resource_spans[0].scope_spans[0].spans.add(
        trace_id=b"\x07" * 16, span_id=sid(3), kind=200, start_time_unix_nano=T0, end_time_unix_nano=T0 + 5
    )
    reply = ExportTraceServiceResponse.FromString(_grpc_export(server, body.SerializeToString()))
    assert reply.partial_success.rejected_spans == 2
    assert "2^63" in reply.partial_success.error_message and "kind" in reply.partial_success.error_message
    _still_serving(server)
