"""`rca demo`'s live driver: a simulated LLM-serving case (spans, then log records) through the real
OpenTelemetry SDK and OTLP/gRPC exporters into a running `rca serve`."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.sdk_replay import replay_logs_with_sdk, replay_with_sdk
from simulation import simulate
from tests.conftest import Server


def test_sdk_replay_delivers_every_span_to_rca_serve(server: Server) -> None:
    case = simulate("llm-gpu_memory_bandwidth", seed=4, rate=0.15)
    assert replay_with_sdk(case, server.otlp_grpc) == case.spans
    window = {"from": str(case.start_ns // 1_000_000), "to": str(case.end_ns // 1_000_000 + 1)}
    response = httpx.get(f"{server.api}/graph", params=window, timeout=30)
    assert response.status_code == 200
    nodes = {n["id"]: n for n in response.json()["nodes"]}
    services = sum(float(n["detail__calls"]) for n in nodes.values() if n["detail__kind"] == "service")
    assert services == case.spans  # every span arrived once, under its own service
    assert nodes[case.truth.node]["detail__kind"] == "resource"
    assert nodes[case.truth.node]["detail__service"] == case.truth.service
    assert {"qdrant", "redis", "postgresql"} <= {k for k, n in nodes.items() if n["detail__kind"] == "virtual"}
    edges = {(e["source"], e["target"]) for e in response.json()["edges"]}
    assert ("vllm-engine", "vllm-worker-0") in edges and ("router", "vllm-engine") in edges


def test_sdk_log_replay_delivers_every_record_to_rca_serve(server: Server) -> None:
    case = simulate("llm-errors", seed=4, rate=0.15)
    assert replay_with_sdk(case, server.otlp_grpc) == case.spans
    assert replay_logs_with_sdk(case, server.otlp_grpc) == case.log_records > 0
    text = httpx.get(f"{server.api}/metrics", timeout=30).text
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}
    assert samples["rca_log_records_received_total"] == case.log_records  # the providers shut down: all acked
    assert samples["rca_graph_log_records_total"] == case.log_records
    assert samples["rca_graph_late_log_records_total"] == 0
