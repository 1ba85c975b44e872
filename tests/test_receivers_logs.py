"""OTLP log exports, good and bad, over both receivers: the same answers as for spans
(`test_receivers_bad_input`, `test_overload`), with `rejected_log_records` in the partial success."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import grpc
import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from ingest.grpc_receiver import ExportHandler, start_grpc_server
from ingest.http_receiver import otlp_http_app
from rca.graph.service_graph import ServiceGraph
from rca.graph.sink import SpanSink
from rca.graph.writer import GraphWriter
from tests.conftest import Server, start_server, stop_server
from tests.logfactory import logs_request, record
from tests.spanfactory import T0, sid, tid
from tests.test_overload import _BlockedGraph, stalled  # noqa: F401  (the fixture)

METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
PROTOBUF = {"content-type": "application/x-protobuf"}
TOKEN = "logs-token"


def _good() -> bytes:
    return logs_request("svc", [record("user 42 logged in"), record("user 43 logged in", tid(1), sid(1))])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("rca"))
    yield running
    assert stop_server(running) == 0


def _grpc_export(server: Server, body: bytes, compression: grpc.Compression | None = None) -> ExportLogsServiceResponse:
    with grpc.insecure_channel(server.otlp_grpc, options=[("grpc.max_send_message_length", 256 << 20)]) as channel:
        return ExportLogsServiceResponse.FromString(
            channel.unary_unary(METHOD)(body, timeout=20, compression=compression)
        )


def _http_export(server: Server, body: bytes, content_type: str = "application/x-protobuf",
                 encoding: str | None = None) -> httpx.Response:  # fmt: skip
    headers = {"content-type": content_type, **({"content-encoding": encoding} if encoding else {})}
    return httpx.post(f"http://{server.otlp_http}/v1/logs", content=body, headers=headers, timeout=30)


def _metrics(server: Server) -> dict[str, float]:
    text = httpx.get(f"{server.api}/metrics", timeout=10).text
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[s.name + "".join(f"{{{k}={v}}}" for k, v in sorted(s.labels.items()))] = s.value
    return found


def _still_serving(server: Server) -> None:
    before = _metrics(server)["rca_graph_log_records_total"]
    assert _grpc_export(server, _good()).partial_success.rejected_log_records == 0
    assert _metrics(server)["rca_graph_log_records_total"] == before + 2  # acknowledged: in the graph


def test_malformed_protobuf_and_json_are_invalid_argument_and_400(server: Server) -> None:
    with pytest.raises(grpc.RpcError) as failure:
        _grpc_export(server, b"\x0a\xff\xff\xff\xff\x0f garbage")
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert failure.value.details()
    response = _http_export(server, b"\x0a\xff\xff garbage")
    assert response.status_code == 400
    assert status_pb2.Status.FromString(response.content).message
    response = _http_export(server, b'{"resourceLogs": [', content_type="application/json")
    assert response.status_code == 400
    assert response.json()["message"]
    assert _metrics(server)["rca_otlp_requests_refused_total{reason=malformed}"] >= 3
    _still_serving(server)


def test_invalid_records_are_partial_success_over_every_encoding(server: Server) -> None:
    records = [record("ok 1"), record("bad trace id", trace_id=b"\x01\x02\x03"), record("no time", time=0)]
    body = logs_request("partial", records)
    before = _metrics(server)
    reply = _grpc_export(server, body)
    assert reply.partial_success.rejected_log_records == 2
    assert "trace_id" in reply.partial_success.error_message
    assert "timestamp" in reply.partial_success.error_message
    http_reply = ExportLogsServiceResponse.FromString(_http_export(server, body).content)
    assert http_reply.partial_success.rejected_log_records == 2
    document = {
        "resourceLogs": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "partial"}}]},
                "scopeLogs": [
                    {
                        "logRecords": [
                            {"timeUnixNano": str(T0), "body": {"stringValue": "ok 2"}},
                            {"timeUnixNano": str(T0), "spanId": "abcd", "body": {"stringValue": "short span id"}},
                        ]
                    }
                ],
            }
        ]
    }
    response = _http_export(server, json.dumps(document).encode(), content_type="application/json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    partial = response.json()["partialSuccess"]
    assert partial["rejectedLogRecords"] == "1"
    assert "span_id" in partial["errorMessage"]
    after = _metrics(server)
    assert after["rca_log_records_received_total"] - before["rca_log_records_received_total"] == 3
    rejected = [k for k in after if k.startswith("rca_log_records_rejected_total")]
    assert sum(after[k] - before.get(k, 0.0) for k in rejected) == 5
    assert after["rca_graph_log_records_total"] - before["rca_graph_log_records_total"] == 3


def test_wrong_content_type_is_415(server: Server) -> None:
    response = _http_export(server, _good(), content_type="text/plain")
    assert response.status_code == 415
    assert "application/x-protobuf" in response.text
    _still_serving(server)


def test_oversize_and_gzip_bombs_are_413_and_resource_exhausted(server: Server) -> None:
    assert _http_export(server, b"\x00" * (65 << 20)).status_code == 413
    bomb = gzip.compress(b"\x00" * (200 << 20), compresslevel=9)
    assert len(bomb) < 1 << 20
    assert _http_export(server, bomb, encoding="gzip").status_code == 413
    with pytest.raises(grpc.RpcError) as failure:
        _grpc_export(server, b"\x00" * (80 << 20), compression=grpc.Compression.Gzip)
    assert failure.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    _still_serving(server)


def test_gzip_bodies_are_accepted(server: Server) -> None:
    before = _metrics(server)["rca_graph_log_records_total"]
    assert _http_export(server, gzip.compress(_good()), encoding="gzip").status_code == 200
    assert _grpc_export(server, _good(), grpc.Compression.Gzip).partial_success.rejected_log_records == 0
    assert _metrics(server)["rca_graph_log_records_total"] == before + 4


def test_the_token_guards_log_exports_on_both_receivers() -> None:
    sink = SpanSink(GraphWriter(ServiceGraph()))
    server, port = start_grpc_server(ExportHandler(sink, api_token=TOKEN), "127.0.0.1:0", max_message_bytes=1 << 20)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(METHOD)
            with pytest.raises(grpc.RpcError) as failure:
                call(_good(), timeout=10, metadata=(("authorization", "Bearer nope"),))
            assert failure.value.code() == grpc.StatusCode.UNAUTHENTICATED
            call(_good(), timeout=10, metadata=(("authorization", f"Bearer {TOKEN}"),))
    finally:
        server.stop(0)
    client = TestClient(otlp_http_app(sink, max_message_bytes=1 << 20, api_token=TOKEN))
    assert client.post("/v1/logs", content=_good(), headers=PROTOBUF).status_code == 401
    authorized = {**PROTOBUF, "authorization": f"Bearer {TOKEN}"}
    assert client.post("/v1/logs", content=_good(), headers=authorized).status_code == 200
    assert sink.requests_refused["unauthenticated"] == 2
    assert sink.writer.read(lambda g: g.counts().log_records) == 4
    sink.writer.close()


def test_overload_is_503_with_retry_after_and_unavailable_with_retry_info(
    stalled: tuple[_BlockedGraph, SpanSink],  # noqa: F811
) -> None:
    _, sink = stalled
    client = TestClient(otlp_http_app(sink, max_message_bytes=1 << 20, api_token=None))
    response = client.post("/v1/logs", content=_good(), headers=PROTOBUF)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    server, port = start_grpc_server(ExportHandler(sink, api_token=None), "127.0.0.1:0", max_message_bytes=1 << 20)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, pytest.raises(grpc.RpcError) as failure:
            channel.unary_unary(METHOD)(_good(), timeout=10)
        assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "google.rpc.retryinfo-bin" in dict(failure.value.trailing_metadata())
    finally:
        server.stop(0)
    assert sink.log_counts().dropped == {"overload": 4}  # told to retry, so counted as dropped, not received
    assert sink.log_counts().received == 0
