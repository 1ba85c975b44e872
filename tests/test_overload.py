"""A full ingest queue answers retryable errors and keeps nothing half-applied."""

from __future__ import annotations

import threading

import grpc
import pytest
from starlette.testclient import TestClient

from ingest.grpc_receiver import ExportHandler, start_grpc_server
from ingest.http_receiver import otlp_http_app
from rca.graph.service_graph import ServiceGraph
from rca.graph.sink import SpanSink
from rca.graph.writer import GraphWriter, Overloaded
from tests.spanfactory import batch, request, sid, span


class _BlockedGraph(ServiceGraph):
    """A graph whose writer stalls until released, so the queue fills up."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Event()

    def add(self, spans):  # type: ignore[no-untyped-def]
        self.entered.set()
        self.release.wait(30)
        super().add(spans)


@pytest.fixture
def stalled() -> tuple[_BlockedGraph, SpanSink]:
    graph = _BlockedGraph()
    sink = SpanSink(GraphWriter(graph, queue_size=1))

    # one batch held in the writer, one in the queue: the next submit finds it full
    def submit(n: int) -> threading.Thread:
        thread = threading.Thread(target=sink.writer.submit, args=(batch(("a", "op", n, 0, 0, 1)),), daemon=True)
        thread.start()
        return thread

    submit(10)
    assert graph.entered.wait(10)
    submit(11)
    while sink.writer.depth < 1:
        threading.Event().wait(0.01)
    yield graph, sink
    graph.release.set()


def test_graph_writer_refuses_when_full_then_recovers(stalled: tuple[_BlockedGraph, SpanSink]) -> None:
    graph, sink = stalled
    with pytest.raises(Overloaded):
        sink.writer.submit(batch(("a", "op", 1, 0, 0, 1)))
    graph.release.set()
    while sink.writer.depth > 0:
        threading.Event().wait(0.01)
    sink.writer.submit(batch(("a", "op", 2, 0, 0, 1)))
    assert sink.writer.read(lambda g: g.counts().spans) == 3


def test_http_overload_is_503_with_retry_after(stalled: tuple[_BlockedGraph, SpanSink]) -> None:
    _, sink = stalled
    client = TestClient(otlp_http_app(sink, max_message_bytes=1 << 20, api_token=None))
    body = request("svc", [span(sid(5))]).SerializeToString()
    response = client.post("/v1/traces", content=body, headers={"content-type": "application/x-protobuf"})
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert sink.dropped["overload"] == 1


def test_grpc_overload_is_unavailable_with_retry_info(stalled: tuple[_BlockedGraph, SpanSink]) -> None:
    _, sink = stalled
    server, port = start_grpc_server(ExportHandler(sink, api_token=None), "127.0.0.1:0", max_message_bytes=1 << 20)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            with pytest.raises(grpc.RpcError) as failure:
                call(request("svc", [span(sid(6))]).SerializeToString(), timeout=10)
        assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
        trailers = dict(failure.value.trailing_metadata())
        assert "google.rpc.retryinfo-bin" in trailers
        assert "grpc-status-details-bin" in trailers
    finally:
        server.stop(0)


def test_requests_beyond_the_queue_bound_are_refused_before_decoding() -> None:
    sink = SpanSink(GraphWriter(ServiceGraph(), queue_size=2))
    server, port = start_grpc_server(ExportHandler(sink, api_token=None), "127.0.0.1:0", max_message_bytes=1 << 20)
    try:
        with sink.admit(), sink.admit(), grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            with pytest.raises(grpc.RpcError) as failure:
                call(request("svc", [span(sid(8))]).SerializeToString(), timeout=10)
            assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
        assert sink.requests_refused["overload"] == 1
        call = grpc.insecure_channel(f"127.0.0.1:{port}").unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
        )
        call(request("svc", [span(sid(9))]).SerializeToString(), timeout=10)  # places free again: accepted
        assert sink.writer.read(lambda g: g.counts().spans) == 1
    finally:
        server.stop(0)
