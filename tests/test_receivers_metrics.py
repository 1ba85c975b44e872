"""Bad metric exports at both receivers: clear errors, partial success naming what was refused,
415, 413, gzip, overload with RetryInfo, and nothing accepted is lost."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import grpc
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from starlette.testclient import TestClient

from ingest.grpc_receiver import ExportHandler, start_grpc_server
from ingest.http_receiver import otlp_http_app
from rca.graph.service_graph import ServiceGraph
from rca.graph.sink import SpanSink
from rca.graph.writer import GraphWriter
from tests.metricrequests import CUMULATIVE, T0, metric, number, otlp_json, request
from tests.test_overload import _BlockedGraph, stalled  # noqa: F401  (the fixture)

METHOD = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
PROTOBUF = {"content-type": "application/x-protobuf"}
GPU = {"gpu": "0", "Hostname": "node-a", "exported_pod": "vllm-engine-7d9f8b6c5d-x2x4z"}
LIMIT = 1 << 20


def _good() -> bytes:
    points = [number(0.5, GPU, time_unix_nano=T0), number(0.6, GPU, time_unix_nano=T0 + 10**10)]
    return request(
        ({"service.name": "dcgm-exporter"}, [metric("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", *points)])
    ).SerializeToString()


def _partial() -> bytes:
    """One good point, a staleness marker (accepted, holding nothing), one without a time and a
    sum of unspecified temporality."""
    gauge = metric(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        number(0.5, GPU, time_unix_nano=T0),
        number(0.5, GPU, time_unix_nano=T0, flags=1),
        number(0.5, GPU, time_unix_nano=0),
    )
    unspecified = metric(
        "container_cpu_usage_seconds_total", "sum", number(1.0, {"pod": "a"}, time_unix_nano=T0), monotonic=True
    )
    return request(({"service.name": "dcgm-exporter"}, [gauge, unspecified])).SerializeToString()


@pytest.fixture
def receivers() -> Iterator[tuple[SpanSink, TestClient, grpc.Channel]]:
    sink = SpanSink(GraphWriter(ServiceGraph()))
    server, port = start_grpc_server(ExportHandler(sink, api_token=None), "127.0.0.1:0", max_message_bytes=LIMIT)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield sink, TestClient(otlp_http_app(sink, max_message_bytes=LIMIT, api_token=None)), channel
    finally:
        server.stop(0)
        sink.writer.close()


def _points_in_graph(sink: SpanSink) -> int:
    return sink.writer.read(lambda g: g.counts().metric_points)


def test_malformed_requests_are_invalid_argument_and_400(receivers: tuple[SpanSink, TestClient, grpc.Channel]) -> None:
    sink, http, channel = receivers
    with pytest.raises(grpc.RpcError) as failure:
        channel.unary_unary(METHOD)(b"\x0a\xff\xff\xff\xff\x0f garbage", timeout=10)
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT and failure.value.details()
    response = http.post("/v1/metrics", content=b"\x0a\xff\xff garbage", headers=PROTOBUF)
    assert response.status_code == 400 and status_pb2.Status.FromString(response.content).message
    response = http.post("/v1/metrics", content=b'{"resourceMetrics": [', headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["message"]
    assert http.post("/v1/metrics", content=_good(), headers={"content-type": "text/plain"}).status_code == 415
    assert sink.requests_refused == {"malformed": 3, "unsupported_media_type": 1}
    assert http.post("/v1/metrics", content=_good(), headers=PROTOBUF).status_code == 200  # still serving
    assert _points_in_graph(sink) == 2


def test_points_that_cannot_be_read_are_a_partial_success_in_every_encoding(
    receivers: tuple[SpanSink, TestClient, grpc.Channel],
) -> None:
    sink, http, channel = receivers
    reply = ExportMetricsServiceResponse.FromString(channel.unary_unary(METHOD)(_partial(), timeout=10))
    assert reply.partial_success.rejected_data_points == 2
    for reason in ("no timestamp", "aggregation_temporality"):
        assert reason in reply.partial_success.error_message
    assert "staleness" not in reply.partial_success.error_message
    http_reply = ExportMetricsServiceResponse.FromString(
        http.post("/v1/metrics", content=_partial(), headers=PROTOBUF).content
    )
    assert http_reply.partial_success.rejected_data_points == 2
    points = number(0.5, GPU, time_unix_nano=T0), number(0.5, GPU, time_unix_nano=0)
    gauge = metric("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", *points)
    document = otlp_json(request(({"service.name": "dcgm-exporter"}, [gauge])))
    response = http.post("/v1/metrics", content=document, headers={"content-type": "application/json"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    partial = json.loads(response.text)["partialSuccess"]
    assert partial["rejectedDataPoints"] == "1" and "timestamp" in partial["errorMessage"]
    counts = sink.metric_counts()
    assert counts.received == 3 and sum(counts.rejected.values()) == 5  # 2 + 2 + 1: markers are no rejection
    assert _points_in_graph(sink) == 3  # every accepted point is in the graph


def test_gzip_oversize_and_cumulative_sums(receivers: tuple[SpanSink, TestClient, grpc.Channel]) -> None:
    sink, http, channel = receivers
    compressed = {**PROTOBUF, "content-encoding": "gzip"}
    assert http.post("/v1/metrics", content=gzip.compress(_good()), headers=compressed).status_code == 200
    channel.unary_unary(METHOD)(_good(), timeout=10, compression=grpc.Compression.Gzip)
    assert http.post("/v1/metrics", content=b"\x00" * (LIMIT + 1), headers=PROTOBUF).status_code == 413
    bomb = gzip.compress(b"\x00" * (50 * LIMIT))
    assert http.post("/v1/metrics", content=bomb, headers=compressed).status_code == 413
    counter = [
        number(
            float(k), {"pod": "cart-5f6585d649-fnmft"}, time_unix_nano=T0 + k * 10**10, start_time_unix_nano=T0 - 10**9
        )
        for k in range(3)
    ]
    body = request(
        ({}, [metric("container_cpu_usage_seconds_total", "sum", *counter, temporality=CUMULATIVE, monotonic=True)])
    )
    assert not ExportMetricsServiceResponse.FromString(
        channel.unary_unary(METHOD)(body.SerializeToString(), timeout=10)
    ).HasField("partial_success")
    assert _points_in_graph(sink) == 4 + 2  # the counter's first point starts its rate


def test_overload_is_503_and_unavailable_and_counted_as_dropped(stalled: tuple[_BlockedGraph, SpanSink]) -> None:  # noqa: F811
    _, sink = stalled
    response = TestClient(otlp_http_app(sink, max_message_bytes=LIMIT, api_token=None)).post(
        "/v1/metrics", content=_good(), headers=PROTOBUF
    )
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    server, port = start_grpc_server(ExportHandler(sink, api_token=None), "127.0.0.1:0", max_message_bytes=LIMIT)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, pytest.raises(grpc.RpcError) as failure:
            channel.unary_unary(METHOD)(_good(), timeout=10)
        assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "google.rpc.retryinfo-bin" in dict(failure.value.trailing_metadata())
    finally:
        server.stop(0)
    assert sink.metric_counts().dropped == {"overload": 4} and sink.metric_counts().received == 0
